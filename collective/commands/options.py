"""Command-line options that several commands share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["ConfigOption"]

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
