"""The question file of `collective eval`: JSON lines, one question each, checked line by line.

A line is an object::

    {"id": "density-c110", "question": "What is the density of C110 copper?",
     "numbers": [8.96], "gold_chunks": ["metal/c110_copper.md#Density and melting range"]}

* `question` (required): the text asked.
* What a correct answer states, at least one of: `numbers` (every one, as written or with
  thousands separators), `entity` (named; with `entities`, the names the question lists, named
  first among them), `strings` (every one, case aside).
* `id` (optional, unique; default `line-N`), `kind` (optional label: the table is also given
  per kind), `gold_chunks` (optional: chunk ids, or `SOURCE#HEADING` with the source's path as
  the KB holds it or its tail, and the heading's last part): evidence recall and citation
  precision are measured against them.

Blank lines are skipped. Anything else is an `EvalFileError` naming the line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collective.errors import ConfigError
from collective.kb.store import Chunk
from collective.local_files import read_regular_file

__all__ = ["MAX_QUESTIONS_BYTES", "EvalFileError", "EvalQuestion", "load_questions", "resolve_gold"]

MAX_QUESTIONS_BYTES = 16 << 20
"""The largest question file read (the bundled 113 questions take 37 KiB)."""


class EvalFileError(ConfigError):
    """A question file that cannot be read: the message names the file and the line."""


@dataclass(frozen=True)
class EvalQuestion:
    """One question and what a correct answer states."""

    id: str
    question: str
    numbers: tuple[float, ...] = ()
    """Every one must appear in a correct answer."""
    entity: str = ""
    """The entity a correct answer names (first among `entities` where given)."""
    entities: tuple[str, ...] = ()
    """The names the question lists (the entity among them)."""
    strings: tuple[str, ...] = ()
    """Every one must appear in a correct answer (case aside)."""
    gold_chunks: tuple[str, ...] = ()
    """Chunk ids or `SOURCE#HEADING` refs of the evidence (`resolve_gold` makes them ids)."""
    kind: str = ""
    line: int = field(default=0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The question as a line of a question file (empty fields left out)."""
        out: dict[str, Any] = {"id": self.id, "question": self.question}
        for key in ("kind", "numbers", "entity", "entities", "strings", "gold_chunks"):
            value = getattr(self, key)
            if value:
                out[key] = list(value) if isinstance(value, tuple) else value
        return out


_KEYS = {"id", "question", "numbers", "entity", "entities", "strings", "gold_chunks", "kind"}


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"`{key}` must be a list of non-empty strings")
    return tuple(value)


def _finite(number: float) -> bool:
    """Whether `number` is a finite float (NaN, Infinity and ints past a float's range are not)."""
    try:
        return math.isfinite(float(number))
    except OverflowError:
        return False


def _question(raw: Any, line: int) -> EvalQuestion:
    if not isinstance(raw, dict):
        raise ValueError("a line must be a JSON object")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; the keys are {sorted(_KEYS)}")
    text = raw.get("question")
    if not isinstance(text, str) or not text.strip():
        raise ValueError('no `question` (a non-empty string), e.g. {"question": "...", ...}')
    numbers = raw.get("numbers", [])
    if not isinstance(numbers, list) or not all(
        isinstance(n, int | float) and not isinstance(n, bool) for n in numbers
    ):
        raise ValueError("`numbers` must be a list of numbers")
    if not all(_finite(n) for n in numbers):  # no answer can state NaN, nor be scored on it
        raise ValueError(f"`numbers` must be finite numbers, not {numbers}")
    entity = raw.get("entity", "")
    if not isinstance(entity, str):
        raise ValueError("`entity` must be a string")
    entities = _strings(raw.get("entities", []), "entities")
    if entities and entity not in entities:
        raise ValueError(f"`entity` {entity!r} is not among `entities`")
    strings = _strings(raw.get("strings", []), "strings")
    if not (numbers or entity.strip() or strings):
        raise ValueError("no gold answer: give numbers, entity or strings")
    qid = raw.get("id", f"line-{line}")
    kind = raw.get("kind", "")
    if not isinstance(qid, str) or not qid.strip() or not isinstance(kind, str):
        raise ValueError("`id` and `kind` must be non-empty strings")
    return EvalQuestion(
        id=qid,
        question=text,
        numbers=tuple(float(n) for n in numbers),
        entity=entity,
        entities=entities,
        strings=strings,
        gold_chunks=_strings(raw.get("gold_chunks", []), "gold_chunks"),
        kind=kind,
        line=line,
    )


def load_questions(path: Path) -> list[EvalQuestion]:
    """The questions of a JSONL file, in order.

    The file goes through the guard of every file the user names (a regular file of at most
    `MAX_QUESTIONS_BYTES`): a FIFO or a device is refused at once.

    Raises:
        EvalFileError: The file is missing, unreadable, not a regular file or too large, has no
            question, or a line is not a question (the message names the line and what is
            wrong).
    """
    fix = "give a JSONL file of questions (see `collective eval --help`)"
    try:
        raw = read_regular_file(path, limit=MAX_QUESTIONS_BYTES, what="question file", fix=fix)
        text = raw.decode("utf-8")
    except ConfigError as exc:  # the guard's refusal, as the eval's own file error
        raise EvalFileError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise EvalFileError(f"the question file {path} is not UTF-8 text ({exc}); {fix}") from None
    out: list[EvalQuestion] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            question = _question(json.loads(line), number)
        except (ValueError, RecursionError) as exc:  # json.JSONDecodeError is a ValueError
            raise EvalFileError(f"{path}:{number}: {exc}; see `collective eval --help`") from None
        if question.id in seen:
            raise EvalFileError(
                f"{path}:{number}: id {question.id!r} is also on line {seen[question.id]}"
            )
        seen[question.id] = number
        out.append(question)
    if not out:
        raise EvalFileError(f"{path} holds no question (one JSON object a line)")
    return out


def resolve_gold(
    questions: Iterable[EvalQuestion], chunks: Iterable[Chunk], path: Path
) -> dict[str, list[str]]:
    """Each question's gold chunk ids in the KB that holds `chunks`.

    Raises:
        EvalFileError: A gold ref matches no chunk of the KB (naming its line).
    """
    listed = list(chunks)
    ids = {c.id for c in listed}
    by_ref: dict[tuple[str, str], list[str]] = {}
    for c in listed:
        by_ref.setdefault((c.source, c.heading.split(" > ")[-1].strip()), []).append(c.id)
    out: dict[str, list[str]] = {}
    for q in questions:
        found: list[str] = []
        for ref in q.gold_chunks:
            if ref in ids:
                found.append(ref)
                continue
            source, _, heading = ref.partition("#")
            match = [
                i
                for (src, head), chunk_ids in by_ref.items()
                if head == heading.strip() and (src == source or src.endswith("/" + source))
                for i in chunk_ids
            ]
            if not match:
                raise EvalFileError(
                    f"{path}:{q.line}: gold chunk {ref!r} is not in the knowledge base (a chunk "
                    "id, or SOURCE#HEADING as `collective kb list` shows them)"
                )
            found.extend(match)
        out[q.id] = list(dict.fromkeys(found))
    return out
