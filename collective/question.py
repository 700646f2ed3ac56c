"""The council's question at the library's edge (`CouncilInput`), checked before any model sees it.

* Empty or blank: refused (`InvalidQuestion`, a `ConfigError`: exit 2 in the CLI).
* Invalid Unicode (lone surrogates, which Python strings can hold but no UTF-8 request can
  carry; a command line with bytes that are not UTF-8 produces them): each is replaced with
  U+FFFD and the run's `notes` say so.
* Over-long: cut to `MAX_QUESTION_CHARS`, with a marker where it was cut and a note, so the
  answer's reader sees the cut, not only the budget report. Long material belongs in the
  knowledge base, where retrieval picks what fits.
"""

from __future__ import annotations

import re

from collective.errors import ConfigError

__all__ = ["MAX_QUESTION_CHARS", "InvalidQuestion", "check_question"]

MAX_QUESTION_CHARS = 8_000
"""About 2,000 tokens: the reference plans' task allocation (docs/design.md)."""

_SURROGATE = re.compile("[\ud800-\udfff]")


class InvalidQuestion(ConfigError):
    """A question that cannot be asked (not text, empty or blank)."""


def check_question(question: object, max_chars: int = MAX_QUESTION_CHARS) -> tuple[str, list[str]]:
    """The question as the council will ask it, and a note for every change made.

    Args:
        question: What the caller passed as `question`.
        max_chars: The longest question kept whole.

    Raises:
        InvalidQuestion: Not a string, or empty or blank.
    """
    if not isinstance(question, str):
        raise InvalidQuestion(
            f'the question must be text, not {type(question).__name__}; pass {{"question": "..."}}'
        )
    if not question.strip():
        raise InvalidQuestion('the question is empty; ask something, e.g. "PETG or ASA?"')
    notes: list[str] = []
    question, invalid = _SURROGATE.subn("\ufffd", question)
    if invalid:
        notes.append(
            f"the question held {invalid} invalid Unicode character(s) (lone surrogates, e.g. "
            "from bytes that are not UTF-8); each was replaced with U+FFFD"
        )
    if len(question) > max_chars:
        cut = len(question) - max_chars
        question = f"{question[:max_chars]}\n[… question cut: {cut:,} characters left out …]"
        notes.append(
            f"the question was cut to its first {max_chars:,} characters ({cut:,} left out); "
            "ask a shorter question and put long material in the knowledge base "
            "(`collective kb add`)"
        )
    return question, notes
