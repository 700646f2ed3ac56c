"""Which checked claims each line of an answer holds: what the verdict's marks are made of.

`collective ask` marks each line of the verdict (✓ ↻ ✎ ?, `collective.commands.render`) and
the page does the same from the lines `collective serve` sends with a run's result
(`verdict_lines`); both read them here, so that a line is marked alike wherever it is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from collective.verdict.support import plain

__all__ = ["MARKED", "line_statuses", "verdict_lines"]

MARKED = ("supported", "retagged", "fixed", "uncited")
"""The statuses a line is marked with (a `dropped` claim's line is gone from the answer)."""


def line_statuses(answer: str, claims: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[str]]]:
    """The answer's lines, each with the statuses of the claims it holds, each status once.

    A claim belongs to a line that holds its text (the line's tags left out, `plain`); only
    `MARKED` statuses count.
    """
    out = []
    for line in answer.splitlines():
        said = plain(line)
        statuses = [
            c["status"] for c in claims if c["status"] in MARKED and c["text"] and c["text"] in said
        ]
        out.append((line, list(dict.fromkeys(statuses))))
    return out


def verdict_lines(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A run's verdict as `{"text", "marks"}` lines (what `collective serve` sends the page)."""
    answer, claims = str(result.get("answer") or ""), list(result.get("claims") or [])
    return [{"text": line, "marks": marks} for line, marks in line_statuses(answer, claims)]
