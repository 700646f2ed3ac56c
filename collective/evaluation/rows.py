"""The rows file of `collective eval`: one JSON line per finished question, appended.

Each line holds a question's id and text, and per arm its answer and what it cost; `spent` is
what the shared run of that line's arms spent. The file is the eval's state: run again with the
same file, the questions it holds for every requested arm are not asked again.

Nothing in the file is ever rewritten, and nothing is written to a file before it is known as a
rows file (every complete line a row). A line cut short by a crash (the file's last, with no
newline) is left where it is: once the file is known, a newline is appended after it, and
reads skip it from then on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collective.errors import ConfigError
from collective.evaluation.questions import EvalFileError, EvalQuestion
from collective.local_files import read_regular_file

__all__ = ["MAX_ROWS_BYTES", "append_row", "read_rows"]

MAX_ROWS_BYTES = 256 << 20
"""The largest rows file read (a row is a few KiB: 113 questions in five arms take about 1 MiB)."""
_ROW_START = '{"id": '
"""How every row begins (`append_row` writes the id first): a cut line begins so too."""


def _cut_row(line: str) -> bool:
    """Whether `line`, which is not JSON, is the start of a row cut short by a crash."""
    return line.startswith(_ROW_START) or _ROW_START.startswith(line)


def read_rows(path: Path, questions: Sequence[EvalQuestion]) -> dict[str, dict[str, Any]]:
    """Per question id, its arms' rows from an earlier run (later lines win); {} if no file.

    The file is read through the guard every file the user names goes through (a regular file
    of at most `MAX_ROWS_BYTES`), checked whole, and only then, if its last line was cut by a
    crash, ended with a newline so the next row starts on a line of its own.

    Raises:
        EvalFileError: The file is not a rows file (not a regular file, too large, or a complete
            line that is not a row), holds only a cut line, or was made from other questions
            (an id whose text differs). The file is left as it was.
    """
    if not os.path.lexists(path):
        return {}
    fix = "give --out a new file"
    try:
        raw = read_regular_file(path, limit=MAX_ROWS_BYTES, what="results file", fix=fix)
    except ConfigError as exc:  # the guard's refusal, as the eval's own file error
        raise EvalFileError(str(exc)) from None
    lines = raw.decode("utf-8", "replace").split("\n")
    cut_last = lines.pop()  # "" when the file ends with a newline
    texts = {q.id: q.question for q in questions}
    out: dict[str, dict[str, Any]] = {}
    cut_lines = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            qid, text, arms = row["id"], row["question"], row["arms"]
            if not isinstance(arms, dict):
                raise TypeError("arms")
        except json.JSONDecodeError:
            if not _cut_row(line):
                raise EvalFileError(f"{path}:{number} is not a row of `collective eval`; {fix}")
            cut_lines.append(number)  # a run died writing it: a newline was appended after
            continue
        except (ValueError, KeyError, TypeError, RecursionError):
            raise EvalFileError(
                f"{path}:{number} is not a row of `collective eval`; {fix}"
            ) from None
        if qid in texts and texts[qid] != text:
            raise EvalFileError(
                f"{path}:{number}: question {qid!r} reads differently in the question file; "
                f"these results are of other questions: {fix}"
            )
        merged = out.setdefault(qid, {"id": qid, "question": text, "arms": {}, "spent": []})
        merged["arms"].update(arms)
        merged["spent"].append(row.get("spent", {}))
    if cut_lines and not out:
        raise EvalFileError(
            f"{path}:{cut_lines[0]} is not a complete row of `collective eval` and no line is "
            f"one; {fix}"
        )
    if cut_last:  # the last line was being written when the run died
        if not out or not _cut_row(cut_last):
            raise EvalFileError(
                f"{path}:{len(lines) + 1} is not a complete row of `collective eval`"
                + (" and no line before it is one" if not out else "")
                + f"; {fix}"
            )
        with path.open("ab") as f:  # known as a rows file now: end the cut line, keep it
            f.write(b"\n")
    return out


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Append one finished question's line, on disk before returning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as sink:
        sink.write(json.dumps(row, ensure_ascii=False) + "\n")
        sink.flush()
        os.fsync(sink.fileno())
