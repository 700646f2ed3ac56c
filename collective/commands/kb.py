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

    from rich.progress import ProgressColumn, Task
    from rich.table import Table

    from collective.config import CollectiveConfig
    from collective.kb.sqlite_store import Progress, SqliteKnowledgeStore
    from collective.kb.vocabulary import Thing

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
        store = SqliteKnowledgeStore(path, embeddings=embeddings)
    except CollectiveError as exc:  # not a database, or a database that is not a KB
        raise fail(str(exc), exc.exit_code, as_json=as_json) from None
    for note in store.notes:
        typer.echo(f"note: {note}", err=True)
    return store


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
            for note in store.notes:
                typer.echo(f"note: {note}", err=True)
            store.check_model()  # a KB of another embedding model: refuse before adding
            for file in files:
                try:
                    stats.merge(store.add_file(file, embed=False))
                except CollectiveError as exc:  # not UTF-8, vanished: this file only
                    refused.append((str(file), str(exc)))
            if expand:
                expanded, expansion_error = _expand_added(store, chosen, as_json)
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


def _expand(
    store: SqliteKnowledgeStore, chosen: CollectiveConfig, *, quiet: bool
) -> dict[str, object]:
    """Expansions for the chunks that lack one, names for the documents that lack them.

    The models are the settings `kb_expansion` and `kb_names` (or `none`); the demo KB's
    packaged expansions are used where they fit.
    """
    from collective.kb import expansion
    from collective.kb.demo import demo_expansions

    expander, model = expansion.configured_expander(chosen.kb_expansion)
    namer, namer_model = expansion.configured_namer(chosen.kb_names)
    off = "none (the setting kb_expansion, $COLLECTIVE_KB_EXPANSION)"
    if expander is None and namer is None:
        return {"model": off}
    cache = expansion.load_cache(demo_expansions()) if expander is not None else {}

    def run(progress: Progress | None) -> expansion.ExpansionStats:
        return expansion.expand_missing(
            store,
            expander,
            model=model,
            cache=cache,
            progress=progress,
            namer=namer,
            namer_model=namer_model,
            names_only=expander is None,
        )

    what = "naming documents" if expander is None else "naming documents, expanding chunks"
    what = what if namer is not None else "expanding chunks"
    stats = _with_progress(run, quiet=quiet, what=what).to_dict()
    if expander is None:
        return {"model": off, "named": stats["named"]}
    return stats


def _expand_added(
    store: SqliteKnowledgeStore, chosen: CollectiveConfig, quiet: bool
) -> tuple[dict[str, object], str]:
    """`_expand`, and the error line when the model failed (the chunks stay either way)."""
    from collective.errors import CollectiveError

    try:
        return _expand(store, chosen, quiet=quiet), ""
    except CollectiveError as exc:
        return {"model": "failed"}, (
            f"{exc}; the chunks were added, `collective kb reindex --expansions` adds their "
            "expansions"
        )


def _expansion_line(expanded: dict[str, object]) -> str:
    if "generated" not in expanded:
        return str(expanded["model"])
    named = f"; {expanded['named']} documents named" if expanded.get("named") else ""
    return (
        f"{expanded['generated']} written by {expanded['model']} "
        f"({expanded['per_chunk_s']} s a chunk), {expanded['cached']} from the cache{named}"
    )


def _with_progress(
    run: Callable[[Progress | None], T], *, quiet: bool, what: str = "embedding chunks"
) -> T:
    """`run(progress)` with a progress bar of `what` on stderr (none when `quiet`).

    The bar shows how many are done, how many a second, and the time left at that rate.
    """
    if quiet:
        return run(None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TimeRemainingColumn
    from rich.progress import Progress as Bar

    columns = (what, BarColumn(), MofNCompleteColumn(), _rate_column(), TimeRemainingColumn())
    with Bar(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("work", total=None)
        return run(lambda done, total: bar.update(task, completed=done, total=total))


def _rate_column() -> ProgressColumn:
    """A progress column of items a second (`3.2/s`; `-/s` until there is a rate)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:.2f}/s" if speed else "-/s")

    return Rate()


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
        shown = {c.source for c in chunks}
        things = [t for t in store.vocabulary().things() if t.key in shown]
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
        documents = [{"source": t.key, "title": t.title, "names": list(t.names)} for t in things]
        typer.echo(json.dumps({"chunks": rows, "documents": documents}))
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
    if things:
        Console().print(_names_table(things))


def _names_table(things: list[Thing]) -> Table:
    """Each document's source, title and other names."""
    from rich.table import Table

    table = Table(title=f"{len(things)} documents and their names")
    table.add_column("source", overflow="fold")
    table.add_column("title", overflow="fold")
    table.add_column("also named", overflow="fold")
    for t in sorted(things, key=lambda t: t.key):
        table.add_row(t.key, t.title, ", ".join(t.names[1:]))
    return table


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
                expanded = _expand(store, chosen, quiet=as_json)
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


names_app = typer.Typer(
    help="The names each document goes by: list them, add a name (a trade name, an acronym, an "
    "everyday name) or remove one."
)
app.add_typer(names_app, name="names")


def _document(store: SqliteKnowledgeStore, ref: str) -> str:
    """The source of the document `ref` names (its source, title or a name), else fail."""
    source = store.thing(ref)
    if source is None:
        raise fail(
            f"no one document is called {ref!r}; give its source or title as "
            "`collective kb names list` shows them"
        )
    return source


@names_app.command("list")
def names_list(
    thing: Annotated[
        str | None, typer.Argument(help="Only this document (its source, title or a name).")
    ] = None,
    kb: KbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List each document's title and the other names it goes by."""
    import json

    from rich.console import Console

    with _open_existing(kb, as_json=as_json) as store:
        things = store.vocabulary().things()
        if thing is not None:
            source = _document(store, thing)
            things = [t for t in things if t.key == source]
    if as_json:
        rows = [{"source": t.key, "title": t.title, "names": list(t.names)} for t in things]
        typer.echo(json.dumps({"documents": rows}))
        return
    Console().print(_names_table(things))


@names_app.command("add")
def names_add(
    thing: Annotated[str, typer.Argument(help="The document: its source, title or a name.")],
    names: Annotated[list[str], typer.Argument(help="The names to add (quote a phrase).")],
    kb: KbOption = None,
) -> None:
    """Add names a document goes by (kept whatever else the KB names so)."""
    from collective.kb.sqlite_vocabulary import clean_names

    bad = [n for n in names if clean_names([n]) != [" ".join(n.split())]]
    if bad:
        raise fail(
            f"not a name: {', '.join(map(repr, bad))}; a name is 2 to 60 letters, digits, "
            "spaces or .+/()'&- characters"
        )
    with _open_existing(kb) as store:
        source = _document(store, thing)
        added = store.add_names(source, names)
        title = store.vocabulary_titles()[source]
    typer.echo(f"{title} ({source}) is also called: {', '.join(added)}")


@names_app.command("rm")
def names_rm(
    thing: Annotated[str, typer.Argument(help="The document: its source, title or a name.")],
    names: Annotated[list[str], typer.Argument(help="The names to remove (quote a phrase).")],
    kb: KbOption = None,
) -> None:
    """Remove names from a document, whoever gave them (its title stays)."""
    with _open_existing(kb) as store:
        source = _document(store, thing)
        vocab = store.vocabulary()
        title = store.vocabulary_titles()[source]
        held = {n.lower() for t in vocab.things() if t.key == source for n in t.names}
        if any(n.strip().lower() == title.lower() for n in names):
            raise fail(f"{title!r} is the document's title: it stays; edit the file to rename it")
        unknown = [n for n in names if n.strip().lower() not in held]
        if unknown:
            raise fail(
                f"{title} is not called {', '.join(map(repr, unknown))}; "
                f"`collective kb names list {source}` shows its names",
                1,
            )
        removed = store.remove_names(source, names)
    typer.echo(f"{title} ({source}) is no longer called: {', '.join(removed)}")


@app.command("figures")
def figures(
    property: Annotated[
        str | None,
        typer.Argument(help="The property (e.g. density); without it, the properties listed."),
    ] = None,
    kb: KbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """The figures the KB states of one property, in one unit, lowest first."""
    import json

    from rich.console import Console
    from rich.table import Table

    from collective.kb.names import unit_symbol

    with _open_existing(kb, as_json=as_json) as store:
        vocab = store.vocabulary()
    properties = vocab.properties()
    if property is None:
        counts = {p: vocab.figures(p) for p in properties}
        if as_json:
            rows = [
                {"property": p, "figures": len(f), "unit": f[0].unit} for p, f in counts.items()
            ]
            typer.echo(json.dumps({"properties": rows}))
            return
        table = Table(title=f"{len(properties)} properties")
        for column in ("property", "figures", "unit"):
            table.add_column(column, justify="right" if column == "figures" else "left")
        for p, found in counts.items():
            table.add_row(p, str(len(found)), unit_symbol(found[0].unit))
        Console().print(table)
        return
    chosen = next((p for p in properties if p == property.strip().lower()), None)
    chosen = chosen or vocab.property_asked(property)
    if chosen is None:
        raise fail(
            f"the KB has no figures of {property!r}; it has figures of: {', '.join(properties)}",
            1,
            as_json=as_json,
        )
    titles = {t.key: t.title for t in vocab.things()}
    rows_ = sorted(vocab.figures(chosen), key=lambda f: (f.low, f.high, titles.get(f.thing, "")))
    if as_json:
        out = [
            {
                "thing": titles.get(f.thing, f.thing),
                "source": f.thing,
                "low": f.low,
                "high": f.high,
                "unit": f.unit,
                "chunk": f.chunk_id,
                "text": f.text,
            }
            for f in rows_
        ]
        typer.echo(json.dumps({"property": chosen, "figures": out}))
        return
    unit = unit_symbol(rows_[0].unit) if rows_ else ""
    table = Table(title=f"{chosen} ({unit}): {len(rows_)} figures, lowest first")
    table.add_column("thing", overflow="fold")
    table.add_column(chosen, justify="right", no_wrap=True)
    table.add_column("stated as", overflow="fold")
    for f in rows_:
        value = f"{f.low:g}" if f.low == f.high else f"{f.low:g}–{f.high:g}"
        table.add_row(titles.get(f.thing, f.thing), f"{value} {unit}", f.text)
    Console().print(table)
