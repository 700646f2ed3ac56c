"""`collective recall "QUERY"`: what the council's retrieve step would inject, and why.

Mount with `cli_app.command()(recall.recall)`. Without `--kb`, the default KB is used and, if it
does not exist yet, built from the demo KB; an explicit `--kb` must exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from collective.kb.chunking import MAX_CHUNK_CHARS

if TYPE_CHECKING:
    from collective.kb.retrieval import RetrievalResult
    from collective.kb.vocabulary import Thing

__all__ = ["excerpt", "recall"]


def recall(
    query: Annotated[str, typer.Argument(help="The question to retrieve knowledge for.")],
    budget: Annotated[
        str, typer.Option("--budget", "-b", help="Retrieval profile: lean, balanced, deep, auto.")
    ] = "auto",
    kb: Annotated[
        Path | None,
        typer.Option("--kb", help="KB file (default: $COLLECTIVE_KB or .collective/kb.sqlite)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    max_latency_ms: Annotated[
        float | None, typer.Option("--max-latency-ms", min=0, help="Latency bound (ms).")
    ] = None,
    max_inject: Annotated[
        int | None, typer.Option("--max-inject", min=1, help="At most this many chunks.")
    ] = None,
    context: Annotated[
        str, typer.Option(help="Conversation context (used by auto and follow-up questions).")
    ] = "",
) -> None:
    """Retrieve KB chunks for QUERY under a budget profile and show them with diagnostics."""
    from functools import partial

    from collective.commands import kb as kb_command

    fail = partial(kb_command.fail, as_json=json_out)  # with --json, the error object too

    from collective.question import is_blank

    if is_blank(query):
        raise fail('the query is empty; give a question, e.g. collective recall "PETG drying"')
    import json

    from collective.errors import CollectiveError
    from collective.kb.demo import open_default_store
    from collective.kb.retrieval import PROFILES, retrieve
    from collective.kb.sqlite_store import SqliteKnowledgeStore

    if budget != "auto" and budget not in PROFILES:  # a registered profile is one too
        raise fail(f"unknown --budget {budget!r}; use {', '.join(PROFILES)} or auto")

    if kb is not None and not kb.exists():
        raise fail(
            f"no knowledge base at {kb}; create one with `collective kb add PATH... --kb {kb}`"
        )
    embeddings = kb_command.embeddings_setting(as_json=json_out)
    try:
        if kb is not None:
            store = SqliteKnowledgeStore(kb, embeddings=embeddings)
        else:
            store = open_default_store(embeddings=embeddings)
        with store:
            for note in store.notes:
                typer.echo(f"note: {note}", err=True)
            result = retrieve(
                store,
                query,
                budget,
                max_inject=max_inject,
                max_latency_ms=max_latency_ms,
                context=context,
            )
            vocabulary = store.vocabulary()
            names = {c.id: _names(vocabulary.thing_of(c.id)) for c in result.injected}
    except CollectiveError as exc:
        raise fail(str(exc), exc.exit_code) from None
    if json_out:
        data = result.to_dict()
        data["chunks"] = [
            {**meta, "names": names[chunk.id], "text": chunk.text}
            for meta, chunk in zip(data["chunks"], result.injected, strict=True)
        ]
        typer.echo(json.dumps(data))
        return
    _print(result, names)


def _names(thing: Thing | None) -> list[str]:
    """Every name of a chunk's document, its title first (none for a chunk of no document)."""
    return list(thing.names) if thing is not None else []


def excerpt(text: str, max_chars: int = MAX_CHUNK_CHARS) -> str:
    """`text` up to `max_chars` (a whole chunk as `kb add` makes them), else its start.

    A huge chunk in an old KB is never rendered whole: the excerpt says how much is left out.
    """
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\n[… {len(text) - max_chars:,} more characters not shown]"


def _print(result: RetrievalResult, names: dict[str, list[str]]) -> None:
    from rich.console import Console
    from rich.panel import Panel
    from rich.text import Text

    console = Console()
    console.print(
        f"[bold]profile[/] requested {result.requested}, applied [bold]{result.applied}[/] "
        f"({result.reason}); {result.candidates} candidates, {len(result.rewrites)} rewrites, "
        f"{len(result.injected)} injected, {result.latency_ms:.1f} ms"
    )
    for chunk in result.injected:
        title = f"[KB#{chunk.id}] score {chunk.score:.2f}" + _sides(result.sides.get(chunk.id))
        tags = f"  tags: {', '.join(chunk.tags)}" if chunk.tags else ""
        also = names.get(chunk.id, [])[1:]
        tags += f"  also: {', '.join(also)}" if also else ""
        body = Text(excerpt(chunk.text))
        console.print(
            Panel(
                body,
                title=title,
                subtitle=f"{chunk.source} · {chunk.heading}{tags}",
                title_align="left",
                subtitle_align="left",
            )
        )
    if result.rewrites:
        console.print("[bold]rewrites[/]")
        for rewritten in result.rewrites:
            console.print(f"  {rewritten}", markup=False)
    console.print("[bold]diagnostics[/]")
    for line in result.diagnostics:
        console.print(f"  {line}", markup=False)


def _sides(side: dict | None) -> str:
    """What the lexical and dense searches and deep's reranker said of a chunk, for its title.

    Without the dense side (a KB without vectors, or none near enough) a chunk has no hybrid
    sides, only deep's reranker score if it ran.
    """
    if not side:
        return ""
    said = []
    if "lexical_rank" in side:
        said.append(
            f"lexical #{side['lexical_rank']} {side['lexical_score']:.2f}"
            if side["lexical_rank"]
            else "lexical -"
        )
        said.append(
            f"dense #{side['dense_rank']} cos {side['dense_score']:.2f}"
            if side["dense_rank"]
            else f"dense cos {side['dense_score']:.2f}"
            if side["dense_score"] is not None
            else "dense -"
        )
    if "rerank_score" in side:
        said.append(f"reranker {side['rerank_score']:.2f}")
    return f" ({', '.join(said)})"
