"""The rows file of `collective eval`: one JSON line per finished question, appended.

Each line holds a question's id and text, and per arm its answer and what it cost; `spent` is
what the shared run of that line's arms spent. The file is the eval's state: run again with the
same file, the questions it holds for every requested arm are not asked again. A line cut short
by a crash is dropped (and the file truncated before it); nothing else is ever rewritten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collective.evaluation.questions import EvalFileError, EvalQuestion

__all__ = ["append_row", "read_rows"]


def read_rows(path: Path, questions: Sequence[EvalQuestion]) -> dict[str, dict[str, Any]]:
    """Per question id, its arms' rows from an earlier run (later lines win); {} if no file.

    Raises:
        EvalFileError: The file is not a rows file, or was made from other questions (an id
            whose text differs).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise EvalFileError(f"cannot read the results file {path}: {exc}") from None
    if raw and not raw.endswith(b"\n"):  # the last line was being written when the run died
        cut = raw.rfind(b"\n") + 1
        with path.open("r+b") as f:
            f.truncate(cut)
        raw = raw[:cut]
    texts = {q.id: q.question for q in questions}
    out: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            qid, text, arms = row["id"], row["question"], row["arms"]
        except (ValueError, KeyError, TypeError):
            raise EvalFileError(
                f"{path}:{number} is not a row of `collective eval`; give --out a new file"
            ) from None
        if qid in texts and texts[qid] != text:
            raise EvalFileError(
                f"{path}:{number}: question {qid!r} reads differently in the question file; "
                "these results are of other questions: give --out a new file"
            )
        merged = out.setdefault(qid, {"id": qid, "question": text, "arms": {}, "spent": []})
        merged["arms"].update(arms)
        merged["spent"].append(row.get("spent", {}))
    return out


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Append one finished question's line, on disk before returning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as sink:
        sink.write(json.dumps(row, ensure_ascii=False) + "\n")
        sink.flush()
        os.fsync(sink.fileno())
