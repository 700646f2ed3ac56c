"""The council's question at the library's edge (`CouncilInput`), checked before any model sees it.

* Empty or blank: refused (`InvalidQuestion`, a `ConfigError`: exit 2 in the CLI). Blank means
  nothing a reader could see (`is_blank`): whitespace of any kind, and characters that render
  as nothing (zero-width, format and control characters, marks with no letter, fillers).
* Invalid Unicode (lone surrogates, which Python strings can hold but no UTF-8 request can
  carry; a command line with bytes that are not UTF-8 produces them): each is replaced with
  U+FFFD and the run's `notes` say so.
* Over-long: cut to `MAX_QUESTION_CHARS`, keeping its beginning and its end (a question often
  follows pasted material, or precedes it), with a marker where the middle was left out and a
  note that says which characters were kept, so the answer's reader sees the cut, not only the
  budget report. Long material belongs in the knowledge base, where retrieval picks what fits.

A question too long for one command-line argument (Linux caps one at 128 KiB) comes from a file
or standard input (`read_question`), read with a bound and refused when it is not a file.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path
from typing import BinaryIO

from collective.errors import ConfigError
from collective.local_files import read_regular_file

__all__ = [
    "MAX_QUESTION_BYTES",
    "MAX_QUESTION_CHARS",
    "InvalidQuestion",
    "check_question",
    "is_blank",
    "read_question",
]

MAX_QUESTION_CHARS = 8_000
"""About 2,000 tokens: the reference plans' task allocation (docs/design.md)."""

_SURROGATE = re.compile("[\ud800-\udfff]")

_INVISIBLE_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Mn", "Me", "Mc"})
"""Separators, controls, format characters, lone surrogates, and marks (with no letter to sit
on, a mark shows nothing a reader can take as a question)."""

_INVISIBLE_RANGES = (
    # Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): rendered as nothing,
    # whatever their category (the Hangul fillers are letters, Lo).
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
    # Blank glyphs that are not default-ignorable.
    (0x2800, 0x2800),  # BRAILLE PATTERN BLANK
)


def _invisible(char: str) -> bool:
    code = ord(char)
    return (
        char.isspace()
        or unicodedata.category(char) in _INVISIBLE_CATEGORIES
        or any(low <= code <= high for low, high in _INVISIBLE_RANGES)
    )


def is_blank(text: str) -> bool:
    """Whether `text` holds nothing a reader could see (see the module docstring).

    Each distinct character is looked at once, so a huge blank text costs one pass in C.
    """
    return all(_invisible(char) for char in set(text))


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
    if is_blank(question):
        raise InvalidQuestion(
            'the question is empty (nothing visible in it); ask something, e.g. "PETG or ASA?"'
        )
    notes: list[str] = []
    question, invalid = _SURROGATE.subn("\ufffd", question)
    if invalid:
        notes.append(
            f"the question held {invalid} invalid Unicode character(s) (lone surrogates, e.g. "
            "from bytes that are not UTF-8); each was replaced with U+FFFD"
        )
    if len(question) > max_chars:
        total, head = len(question), (max_chars + 1) // 2
        tail, cut = max_chars - head, total - max_chars
        marker = f"[… question cut: {cut:,} characters left out here …]"
        question = f"{question[:head]}\n{marker}\n{question[total - tail :]}"
        notes.append(
            f"the question was cut to {max_chars:,} of its {total:,} characters: its first "
            f"{head:,} and its last {tail:,} were kept, the {cut:,} between them (characters "
            f"{head + 1:,}-{head + cut:,}) left out; ask a shorter question and put long "
            "material in the knowledge base (`collective kb add`)"
        )
    return question, notes


MAX_QUESTION_BYTES = 1 << 20
"""The most a question file or standard input may hold (1 MiB); it is cut to
`MAX_QUESTION_CHARS` anyway."""


def read_question(source: str | Path, stdin: BinaryIO | None = None) -> str:
    """The question in the file `source`, or on `stdin` when `source` is `-`.

    Bytes that are not UTF-8 become lone surrogates, which `check_question` repairs with a
    note, as for a command-line argument.

    Raises:
        InvalidQuestion: Not a regular file (a directory, a FIFO, a device), unreadable, or
            over `MAX_QUESTION_BYTES`.
    """
    fix = "put long material in the knowledge base (`collective kb add`)"
    if str(source) == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        raw = stream.read(MAX_QUESTION_BYTES + 1)
        if len(raw) > MAX_QUESTION_BYTES:
            raise InvalidQuestion(
                f"the question on standard input is larger than {MAX_QUESTION_BYTES >> 20} MiB, "
                f"the most accepted; {fix}"
            )
    else:
        try:
            raw = read_regular_file(
                Path(source), limit=MAX_QUESTION_BYTES, what="question file", fix=fix
            )
        except ConfigError as exc:
            raise InvalidQuestion(str(exc)) from None
    return raw.decode("utf-8", errors="surrogateescape")
