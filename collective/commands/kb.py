"""`collective kb`: add, list and remove knowledge-base chunks.

Mount with `cli_app.add_typer(kb.app, name="kb")`. The KB is a SQLite file: `--kb PATH`, else
`$COLLECTIVE_KB`, else `.collective/kb.sqlite`. Heavy imports happen inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from collective.kb.sqlite_store import SqliteKnowledgeStore

__all__ = ["app", "fail"]

app = typer.Typer(help="The knowledge base: add Markdown/text files, list and remove chunks.")

KbOption = Annotated[
    Path | None,
    typer.Option(
        "--kb", help="KB file (default: $COLLECTIVE_KB or .collective/kb.sqlite).", dir_okay=False
    ),
]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print a one-line error to stderr and return the `typer.Exit` to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _kb_path(kb: Path | None) -> Path:
    from collective.kb.demo import default_kb_path

    return kb if kb is not None else default_kb_path()


def _open_existing(kb: Path | None) -> SqliteKnowledgeStore:
    from collective.kb.sqlite_store import SqliteKnowledgeStore

    path = _kb_path(kb)
    if not path.exists():
        raise fail(f"no knowledge base at {path}; create one with `collective kb add PATH...`")
    return SqliteKnowledgeStore(path)


@app.callback()
def _kb() -> None:
    """The knowledge base: add Markdown/text files, list and remove chunks."""


@app.command()
def add(
    paths: Annotated[list[Path], typer.Argument(help="Markdown/text files or directories.")],
    kb: KbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Ingest files (idempotent: unchanged files change nothing)."""
    import json

    from collective.errors import CollectiveError
    from collective.kb.sqlite_store import SqliteKnowledgeStore

    path = _kb_path(kb)
    try:
        with SqliteKnowledgeStore(path) as store:
            stats = store.add_paths(paths)
            total = store.count()
    except CollectiveError as exc:
        raise fail(str(exc), exc.exit_code) from None
    if as_json:
        typer.echo(json.dumps({"kb": str(path), "chunks": total, **stats.to_dict()}))
        return
    typer.echo(
        f"{path}: {stats.files} files ({stats.unchanged_files} unchanged), "
        f"{stats.added} chunks added, {stats.removed} removed, {total} in total"
    )


@app.command("list")
def list_chunks(
    kb: KbOption = None,
    source: Annotated[str | None, typer.Option(help="Only this source.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List chunks with their ids, sources, headings and tags."""
    import json

    from rich.console import Console
    from rich.table import Table

    with _open_existing(kb) as store:
        chunks = store.list(source)
    if as_json:
        rows = [
            {
                "id": c.id,
                "source": c.source,
                "heading": c.heading,
                "tags": list(c.tags),
                "chars": len(c.text),
            }
            for c in chunks
        ]
        typer.echo(json.dumps({"chunks": rows}))
        return
    table = Table(title=f"{len(chunks)} chunks")
    for column in ("id", "source", "heading", "tags", "chars"):
        table.add_column(column)
    for c in chunks:
        table.add_row(c.id, c.source, c.heading, ", ".join(c.tags), str(len(c.text)))
    Console().print(table)


@app.command("rm")
def remove(
    ids: Annotated[list[str] | None, typer.Argument(help="Chunk ids (mem_...).")] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Remove every chunk of this source file.")
    ] = None,
    kb: KbOption = None,
) -> None:
    """Remove chunks by id, or all chunks of a source."""
    if not ids and source is None:
        raise fail("nothing to remove; give chunk ids or --source PATH")
    with _open_existing(kb) as store:
        deleted = store.remove(ids or None, source=source)
    if deleted == 0:
        raise fail("no matching chunks; see `collective kb list` for ids and sources", 1)
    typer.echo(f"removed {deleted} chunks")
