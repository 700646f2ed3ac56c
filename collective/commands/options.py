"""Command-line options that several commands share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from collective.kb.profile_names import Evidence

__all__ = [
    "ConfigOption",
    "EvidenceOption",
    "KbOption",
    "QuestionArgument",
    "QuestionFileOption",
    "RetrievalOption",
    "missing_kb",
]

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="TOML config (default: $COLLECTIVE_CONFIG or ./collective.toml).",
        dir_okay=False,
    ),
]
"""`--config FILE`."""

RetrievalOption = Annotated[
    str | None,
    typer.Option(
        "--retrieval",
        help="Retrieval profile: lean, balanced, deep, one declared in the config's "
        "retrieval_profiles, or auto (chosen per question; the default).",
    ),
]
"""`--retrieval NAME`: a built-in or declared profile, or `auto` (the settings check it)."""

EvidenceOption = Annotated[
    Evidence | None,
    typer.Option(
        "--evidence",
        help="Specialists read the same chunks (shared), a shared head plus a slice each "
        "(split), or split when the chunks exceed one member's KB section (auto).",
    ),
]
"""`--evidence shared|split|auto`."""

KbOption = Annotated[
    Path | None,
    typer.Option("--kb", help="SQLite knowledge base (must exist).", dir_okay=False),
]
"""`--kb FILE`: an existing knowledge base (check it with `missing_kb`)."""

QuestionArgument = Annotated[
    str | None,
    typer.Argument(
        help="The question (- reads it from standard input). Leave out with --thread to resume "
        "an interrupted run."
    ),
]
"""`collective ask QUESTION`."""

QuestionFileOption = Annotated[
    Path | None,
    typer.Option(
        "--question-file",
        help="Read the question from this file (for one longer than a command line takes).",
    ),
]
"""`--question-file FILE`: the question, read with `collective.question.read_question`."""


def missing_kb(kb: Path | None) -> str | None:
    """What to say when `--kb` names no file, or a file that is not a KB; None otherwise.

    The file is only looked at (`check_kb_file`: a directory, FIFO or device is refused without
    opening it), never written.
    """
    if kb is None:
        return None
    if not kb.exists() and not kb.is_symlink():
        return f"no knowledge base at {kb}; create one with `collective kb add PATH... --kb {kb}`"
    from collective.errors import ConfigError
    from collective.kb.sqlite_store import check_kb_file

    try:
        check_kb_file(kb)
    except ConfigError as exc:
        return str(exc)
    return None
