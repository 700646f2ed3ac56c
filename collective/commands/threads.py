"""`collective threads prune --older-than 30d`: checkpoint retention.

LangGraph keeps every checkpoint of every thread; without pruning the checkpoint tables (SQLite
or PostgreSQL) grow without bound. Mount with `cli_app.add_typer(threads.app, name="threads")`.
"""

from __future__ import annotations

import re
from typing import Annotated

import typer

from collective.commands.options import ConfigOption

__all__ = ["app", "parse_age", "prune"]

app = typer.Typer(help="Conversation threads in the checkpoint database.")

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@app.callback()
def _threads() -> None:
    """Conversation threads in the checkpoint database."""


def parse_age(text: str) -> float:
    """`30d`, `12h`, `90m`, `45s` or `2w` in seconds.

    Raises:
        ConfigError: Anything else.
    """
    from collective.errors import ConfigError

    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text.lower())
    if not found:
        raise ConfigError(
            f"--older-than {text!r}: give a number and a unit, e.g. 30d, 12h, 90m (s m h d w)"
        )
    return float(found.group(1)) * _UNITS[found.group(2)]


@app.command()
def prune(
    older_than: Annotated[
        str, typer.Option("--older-than", help="Age of a thread's last run: 30d, 12h, 90m.")
    ],
    config: ConfigOption = None,
    checkpoints: Annotated[
        str | None,
        typer.Option("--checkpoints", help="Checkpoint database: a SQLite file or a URL."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would go; delete nothing.")
    ] = False,
) -> None:
    """Delete threads whose last checkpoint is older than --older-than (memory L2 is kept)."""
    import asyncio

    from collective.commands.errors import user_errors
    from collective.memory.store import prune_threads, redact
    from collective.session import load_settings

    with user_errors():
        age = parse_age(older_than)
        effective = load_settings(config, {"checkpoints": checkpoints})
        location = effective.config.checkpoints
        pruned = asyncio.run(prune_threads(location, age, dry_run=dry_run))
    verb = "would prune" if dry_run else "pruned"
    for thread in pruned:
        typer.echo(thread)
    typer.echo(f"{verb} {len(pruned)} threads older than {older_than} in {redact(location)}")
