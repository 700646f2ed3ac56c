"""`collective kb`: add, list and remove knowledge-base chunks.

Mount with `cli_app.add_typer(kb.app, name="kb")`. The KB is a SQLite file: `--kb PATH`, else
`$COLLECTIVE_KB`, else `.collective/kb.sqlite`. Heavy imports happen inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

if TYPE_CHECKING:
    from collections.abc import Callable

    from collective.config import CollectiveConfig
    from collective.kb.sqlite_store import Progress, SqliteKnowledgeStore

__all__ = ["app", "embeddings_setting", "fail", "settings"]

T = TypeVar("T")

app = typer.Typer(
    help="The knowledge base: add Markdown/text files, list and remove chunks, reindex vectors."
)

KbOption = Annotated[
    Path | None,
    typer.Option(
        "--kb", help="KB file (default: $COLLECTIVE_KB or .collective/kb.sqlite).", dir_okay=False
    ),
]


def fail(message: str, code: int = 2, *, as_json: bool = False) -> typer.Exit:
    """Print a one-line error to stderr (and the error object with `--json`); the exit to raise."""
    if as_json:
        import json

        kind = "ConfigError" if code == 2 else "CollectiveError"
        error = {"type": kind, "message": message, "exit_code": code}
        typer.echo(json.dumps({"error": error}))
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def settings(*, as_json: bool = False, config: Path | None = None) -> CollectiveConfig:
    """The effective settings, for a KB command (its embedding and expansion models).

    Read by `collective.config`: `config` (else `$COLLECTIVE_CONFIG`, else `collective.toml`),
    `.env` and the environment (`$COLLECTIVE_KB_EMBEDDINGS`, ...). An invalid configuration
    fails the command.
    """
    from collective.config import load_config
    from collective.errors import ConfigError

    try:
        return load_config(config).config
    except ConfigError as exc:
        raise fail(str(exc), exc.exit_code, as_json=as_json) from None


def embeddings_setting(*, as_json: bool = False) -> str:
    """The settings' `kb_embeddings`, for a command that computes vectors."""
    return settings(as_json=as_json).kb_embeddings


def _kb_path(kb: Path | None) -> Path:
    from collective.kb.demo import default_kb_path

    return kb if kb is not None else default_kb_path()


def _open_existing(
    kb: Path | None, *, as_json: bool = False, embeddings: str = "none"
) -> SqliteKnowledgeStore:
    """The KB at `kb`, which must exist (`embeddings`: lexical only unless a command embeds)."""
    from collective.errors import CollectiveError
    from collective.kb.sqlite_store import SqliteKnowledgeStore

    path = _kb_path(kb)
    if not path.exists():
        raise fail(
            f"no knowledge base at {path}; create one with `collective kb add PATH...`",
            as_json=as_json,
        )
    try:
        return SqliteKnowledgeStore(path, embeddings=embeddings)
    except CollectiveError as exc:  # not a database, or a database that is not a KB
        raise fail(str(exc), exc.exit_code, as_json=as_json) from None


@app.callback()
def _kb() -> None:
    """The knowledge base: add Markdown/text files, list and remove chunks."""


@app.command()
def add(
    paths: Annotated[list[Path], typer.Argument(help="Markdown/text files or directories.")],
    kb: KbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    expand: Annotated[
        bool,
        typer.Option(
            "--expand/--no-expand",
            help="Have the local chat model write each new chunk's search questions "
            "(the setting kb_expansion: the model, or none).",
        ),
    ] = True,
) -> None:
    """Ingest files (idempotent: unchanged files change nothing).

    Each file is added on its own: a file that cannot be read is listed with its reason and
    the others are still added; the exit code is 1 when any file was refused. New chunks get
    expansions (the questions a chat model says they answer, used to find them, never shown
    as their text) unless `--no-expand`; an interrupted run keeps those finished.
    """
    import json

    from collective.errors import CollectiveError
    from collective.kb.sqlite_store import IngestStats, SqliteKnowledgeStore

    path = _kb_path(kb)
    missing = [str(p) for p in paths if not p.exists()]
    if missing:  # a mistyped path: add nothing, say which
        raise fail(
            f"no such file or directory: {', '.join(missing)}; check the path", 2, as_json=as_json
        )
    chosen = settings(as_json=as_json)
    embeddings = chosen.kb_embeddings
    files = _files(paths)
    refused: list[tuple[str, str]] = []
    stats = IngestStats()
    embedded, vector_error, expansion_error = 0, "", ""
    expanded: dict[str, object] = {"model": "off (--no-expand)"}  # kb add --no-expand
    try:
        with SqliteKnowledgeStore(path, embeddings=embeddings) as store:
            store.check_model()  # a KB of another embedding model: refuse before adding
            for file in files:
                try:
                    stats.merge(store.add_file(file, embed=False))
                except CollectiveError as exc:  # not UTF-8, vanished: this file only
                    refused.append((str(file), str(exc)))
            if expand:
                expanded, expansion_error = _expand_added(store, chosen.kb_expansion, as_json)
            try:
                embedded = _with_progress(store.embed_missing, quiet=as_json)
            except CollectiveError as exc:  # the chunks stay; `kb reindex` finishes the vectors
                vector_error = f"{exc}; the chunks were added, `collective kb reindex` adds vectors"
            total = store.count()
    except CollectiveError as exc:
        raise fail(str(exc), exc.exit_code, as_json=as_json) from None
    if as_json:
        rows = [{"path": name, "reason": why} for name, why in refused]
        extra: dict[str, object] = {"vectors_added": embedded, "vector_error": vector_error or None}
        extra |= {"expansions": expanded, "expansion_error": expansion_error or None}
        typer.echo(
            json.dumps(
                {"kb": str(path), "chunks": total, **stats.to_dict(), **extra, "refused": rows}
            )
        )
    else:
        for name, why in refused:
            typer.echo(f"refused {name}: {why}", err=True)
        for error in (vector_error, expansion_error):
            if error:
                typer.echo(f"error: {error}", err=True)
        typer.echo(
            f"{path}: {stats.files} files ({stats.unchanged_files} unchanged), "
            f"{stats.added} chunks added, {stats.removed} removed, {total} in total, "
            f"{embedded} vectors computed; expansions: {_expansion_line(expanded)}"
            + (f"; {len(refused)} refused" if refused else "")
        )
    if refused or vector_error or expansion_error:
        raise typer.Exit(1)


def _files(paths: list[Path]) -> list[Path]:
    """The files to add: files as given, directories' Markdown/text files recursively.

    A directory's entries that are not regular files (FIFOs, sockets, devices, dangling links)
    are listed too, whatever their name, so that `add` refuses each with its reason.
    """
    from collective.kb.sqlite_store import TEXT_SUFFIXES

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(
                p
                for p in path.rglob("*")
                if not p.is_dir() and (not p.is_file() or p.suffix.lower() in TEXT_SUFFIXES)
            )
        else:
            files.append(path)
    return files


def _expand(store: SqliteKnowledgeStore, spec: str, *, quiet: bool) -> dict[str, object]:
    """Expansions for the chunks that lack one (the demo KB's packaged ones where they fit).

    `spec` is the `kb_expansion` setting: the model that writes them, or `none`.
    """
    from collective.kb import expansion
    from collective.kb.demo import demo_expansions

    expander, model = expansion.configured_expander(spec)
    if expander is None:
        return {"model": "none (the setting kb_expansion, $COLLECTIVE_KB_EXPANSION)"}
    cache = expansion.load_cache(demo_expansions())

    def run(progress: Progress | None) -> expansion.ExpansionStats:
        return expansion.expand_missing(
            store, expander, model=model, cache=cache, progress=progress
        )

    return _with_progress(run, quiet=quiet, what="expanding chunks").to_dict()


def _expand_added(
    store: SqliteKnowledgeStore, spec: str, quiet: bool
) -> tuple[dict[str, object], str]:
    """`_expand`, and the error line when the model failed (the chunks stay either way)."""
    from collective.errors import CollectiveError

    try:
        return _expand(store, spec, quiet=quiet), ""
    except CollectiveError as exc:
        return {"model": "failed"}, (
            f"{exc}; the chunks were added, `collective kb reindex --expansions` adds their "
            "expansions"
        )


def _expansion_line(expanded: dict[str, object]) -> str:
    if "generated" not in expanded:
        return str(expanded["model"])
    return (
        f"{expanded['generated']} written by {expanded['model']} "
        f"({expanded['per_chunk_s']} s a chunk), {expanded['cached']} from the cache"
    )


def _with_progress(
    run: Callable[[Progress | None], T], *, quiet: bool, what: str = "embedding chunks"
) -> T:
    """`run(progress)` with a progress bar of `what` on stderr (none when `quiet`)."""
    if quiet:
        return run(None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = (what, BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("embed", total=None)
        return run(lambda done, total: bar.update(task, completed=done, total=total))


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

    with _open_existing(kb, as_json=as_json) as store:
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
    # Ids stay whole (`kb rm` needs them); long sources and headings wrap instead.
    table.add_column("id", no_wrap=True, min_width=max((len(c.id) for c in chunks), default=2))
    for column in ("source", "heading", "tags"):
        table.add_column(column, overflow="fold")
    table.add_column("chars", justify="right")
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


@app.command()
def reindex(
    kb: KbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    expansions: Annotated[
        bool,
        typer.Option(
            "--expansions", help="First give every chunk without one its expansion (resumable)."
        ),
    ] = False,
) -> None:
    """Recompute every chunk's vector with the configured embedding model.

    Needed when the KB was built with another model (or none); `kb_embeddings` in the config
    file or $COLLECTIVE_KB_EMBEDDINGS chooses the model (default: the bundled all-MiniLM-L6-v2).
    With `--expansions`, a KB built without expansions (or an interrupted `kb add`) gets them
    first, written by the model the setting `kb_expansion` names.
    """
    import json

    from collective.errors import CollectiveError

    chosen = settings(as_json=as_json)
    try:
        with _open_existing(kb, as_json=as_json, embeddings=chosen.kb_embeddings) as store:
            expanded: dict[str, object] = {}
            if expansions:
                expanded = _expand(store, chosen.kb_expansion, quiet=as_json)
            count = 0
            if not expansions or store.embedder is not None:  # expansions alone need no vectors
                count = _with_progress(store.reindex, quiet=as_json)
            model, vectors, chunks = store.vector_status()
            with_expansion, _ = store.expansion_status()
    except CollectiveError as exc:
        raise fail(str(exc), exc.exit_code, as_json=as_json) from None
    if as_json:
        data: dict[str, object] = {"kb": str(_kb_path(kb)), "model": model, "vectors": count}
        if expansions:
            data |= {"expansions": expanded, "chunks_expanded": with_expansion}
        typer.echo(json.dumps(data))
        return
    typer.echo(
        f"{_kb_path(kb)}: {count} vectors computed with {model} ({vectors} of {chunks} chunks)"
        + (
            f"; expansions: {_expansion_line(expanded)} ({with_expansion} of {chunks} chunks)"
            if expansions
            else ""
        )
    )
