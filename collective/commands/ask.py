"""`collective ask "QUESTION"`: one council run, shown live, then the verdict and its budgets.

The run is checkpointed (SQLite, `checkpoints` in config) on a thread: `--thread ID` continues a
conversation, and a run that was interrupted (Ctrl-C, a dead server) is resumed where it
stopped, without re-running the specialists that had finished. Heavy imports (LangGraph, the
backends) happen inside the functions so `collective --help` stays fast.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from collective.commands.options import ConfigOption

if TYPE_CHECKING:
    from collective.config import CollectiveConfig, EffectiveConfig

__all__ = [
    "CONTRACT_KEYS",
    "CouncilSession",
    "RetrievalProfile",
    "ask",
    "load_effective",
    "open_session",
    "run_council",
    "user_errors",
]

CONTRACT_KEYS: dict[str, Any] = {
    "answer": "",
    "citations": [],
    "unknown_citations": [],
    "proposals": [],
    "budgets": [],
    "retrieval": {},
    "timings": {},
}
"""The keys `--json` always carries (DESIGN.md), with their empty values."""


class RetrievalProfile(StrEnum):
    """The retrieval profiles a user may ask for."""

    lean = "lean"
    balanced = "balanced"
    deep = "deep"
    auto = "auto"


class Interrupted(Exception):
    """Ctrl-C during a run; carries the thread to resume."""

    def __init__(self, thread_id: str | None) -> None:
        super().__init__(thread_id)
        self.thread_id = thread_id


def fail(message: str, code: int) -> typer.Exit:
    """Print one `error:` line on stderr and return the exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


@contextmanager
def user_errors(*, json_out: bool = False) -> Iterator[None]:
    """Turn collective's errors and Ctrl-C into one line on stderr and an exit code.

    `CollectiveError` exits with its `exit_code` (2 usage/config, 3 unavailable backends);
    Ctrl-C exits 130 and says how to resume. With `json_out`, stdout still gets exactly one
    JSON object: `{"error": {...}}` (plus the proposals that arrived, for a quorum failure).
    """
    import json

    from collective.errors import CollectiveError, QuorumError

    try:
        yield
    except CollectiveError as exc:
        if json_out:
            payload: dict[str, Any] = {
                "error": {
                    "type": type(exc).__name__,
                    "message": str(exc),
                    "exit_code": exc.exit_code,
                }
            }
            if isinstance(exc, QuorumError):
                payload["proposals"] = exc.proposals
            typer.echo(json.dumps(payload))
        message = " ".join(str(exc).split())
        raise fail(message, exc.exit_code) from None
    except (KeyboardInterrupt, Interrupted) as exc:
        thread = exc.thread_id if isinstance(exc, Interrupted) else None
        hint = (
            f"its checkpoint is kept: resume with `collective ask --thread {thread}`"
            if thread
            else "nothing was changed"
        )
        if json_out:
            typer.echo(json.dumps({"error": {"type": "Interrupted", "thread_id": thread}}))
        raise fail(f"interrupted (Ctrl-C); {hint}", 130) from None


def load_effective(config: Path | None, overrides: Mapping[str, Any]) -> EffectiveConfig:
    """The effective configuration with command-line `overrides`; sets up telemetry."""
    from collective.config import load_config

    effective = load_config(config, overrides)
    if effective.config.telemetry != "none":
        from collective.telemetry import configure_telemetry

        configure_telemetry(effective.config.telemetry)
    return effective


@dataclass
class CouncilSession:
    """An open checkpointer, memory store and compiled council graph."""

    graph: Any
    store: Any
    config: CollectiveConfig


async def open_session(config: CollectiveConfig, stack: AsyncExitStack) -> CouncilSession:
    """Open the SQLite checkpointer and L2 store, compile the graph; `stack` closes them all.

    The backends (connections, models loaded in process) are closed with the stack too.
    """
    import asyncio

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from collective.graph import build_graph
    from collective.memory.store import open_sqlite_store
    from collective.models.registry import close_all

    stack.push_async_callback(close_all)
    config.checkpoints.parent.mkdir(parents=True, exist_ok=True)
    saver = await stack.enter_async_context(
        AsyncSqliteSaver.from_conn_string(str(config.checkpoints))
    )
    store = await asyncio.to_thread(open_sqlite_store, config.memory_db)
    stack.callback(store.conn.close)
    return CouncilSession(build_graph(checkpointer=saver, store=store), store, config)


async def run_council(
    session: CouncilSession,
    question: str | None,
    thread_id: str,
    *,
    on_event: Callable[[Mapping[str, Any]], None] = lambda event: None,
    on_finished: Callable[[str, str | None], None] = lambda node, error: None,
    on_note: Callable[[str], None] = lambda note: None,
    context: Any = None,
) -> dict[str, Any]:
    """Run the council on `thread_id` (or resume its unfinished run) and return the output.

    Args:
        session: From `open_session`.
        question: The question; None resumes the thread's unfinished run.
        thread_id: The conversation thread (checkpoints and memory live there).
        on_event: Receives every custom stream event (progress, budget reports).
        on_finished: `(node, error)` when a node's state update lands (specialists: their
            member name and error), also for work restored from a checkpoint.
        on_note: Receives notes for the user (e.g. an abandoned unfinished run).
        context: The `CouncilContext` (default: from the session's configuration).

    Raises:
        ConfigError: No question and nothing to resume.
        CollectiveError: Whatever the council raises (unavailable backends, quorum, ...).
    """
    from collective.errors import ConfigError

    graph = session.graph
    ctx = context if context is not None else session.config.council_context()
    config = {"configurable": {"thread_id": thread_id}}
    snapshot = await graph.aget_state(config)
    pending = bool(snapshot.next)
    previous = (snapshot.values or {}).get("question")
    graph_input: dict[str, Any] | None
    if question is None or (pending and question == previous):
        if not pending:
            raise ConfigError(
                f"thread {thread_id} has no unfinished run to resume; give a question"
            )
        graph_input = None
        on_note(f"resuming the unfinished run of thread {thread_id}: {previous!r}")
        for proposal in (snapshot.values or {}).get("proposals", []):
            on_finished(proposal["member"], proposal.get("error"))
    else:
        if pending:
            on_note(f"thread {thread_id} had an unfinished run for {previous!r}; starting afresh")
        graph_input = {"question": question}
    final: dict[str, Any] = {}
    async for mode, chunk in graph.astream(
        graph_input, config, context=ctx, stream_mode=["updates", "custom", "values"]
    ):
        if mode == "custom":
            on_event(chunk)
        elif mode == "values":
            final = dict(chunk)
        elif mode == "updates":
            for node, update in chunk.items():
                if node == "specialist" and isinstance(update, dict):
                    for proposal in update.get("proposals") or []:
                        on_finished(proposal["member"], proposal.get("error"))
                elif node in ("retrieve", "plan", "judge"):
                    on_finished(node, None)
    result = {**CONTRACT_KEYS, **final}
    result["thread_id"] = thread_id
    return result


def ask(
    question: Annotated[
        str | None,
        typer.Argument(help="The question. Leave out with --thread to resume an interrupted run."),
    ] = None,
    k: Annotated[
        int | None, typer.Option("--k", min=1, max=64, help="Number of specialists.")
    ] = None,
    config: ConfigOption = None,
    retrieval: Annotated[
        RetrievalProfile | None, typer.Option("--retrieval", help="Retrieval profile.")
    ] = None,
    kb: Annotated[
        Path | None,
        typer.Option("--kb", help="SQLite knowledge base (must exist).", dir_okay=False),
    ] = None,
    thread: Annotated[
        str | None, typer.Option("--thread", "-t", help="Continue this conversation thread.")
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Only the verdict and citations.")
    ] = False,
    review: Annotated[
        bool | None, typer.Option("--review/--no-review", help="Peer review before the judge.")
    ] = None,
) -> None:
    """Ask the council one question: live progress, then the verdict, citations and budgets."""
    with user_errors(json_out=json_out):
        if question is not None and not question.strip():
            raise _usage('the question is empty; ask something, e.g. collective ask "PETG or ASA?"')
        if question is None and thread is None:
            raise _usage('no question; use collective ask "QUESTION" (or --thread ID to resume)')
        if kb is not None and not kb.is_file():
            raise _usage(
                f"no knowledge base at {kb}; create one with `collective kb add PATH... --kb {kb}`"
            )
        overrides = {
            "k": k,
            "retrieval": retrieval.value if retrieval else None,
            "kb": str(kb) if kb else None,
            "review": review,
        }
        effective = load_effective(config, overrides)
        thread_id = thread or uuid.uuid4().hex[:12]
        result = _run_with_progress(
            effective.config, question, thread_id, json_out=json_out, quiet=quiet
        )
    _print_result(result, json_out=json_out, quiet=quiet)


def _usage(message: str) -> Exception:
    from collective.errors import ConfigError

    return ConfigError(message)


def _run_with_progress(
    config: CollectiveConfig, question: str | None, thread_id: str, *, json_out: bool, quiet: bool
) -> dict[str, Any]:
    import asyncio

    from rich.console import Console

    from collective.commands.render import ProgressView

    err = Console(stderr=True)
    # Progress goes to stderr; with --json only where a person watches it.
    show = not quiet and (not json_out or err.is_terminal)

    async def main() -> dict[str, Any]:
        async with AsyncExitStack() as stack:
            session = await open_session(config, stack)
            view = ProgressView(config.members, err)
            if show:
                stack.enter_context(view)
            try:
                return await run_council(
                    session,
                    question,
                    thread_id,
                    on_event=view.event,
                    on_finished=lambda node, error: view.finished(node, failed=error),
                    on_note=lambda note: (
                        err.print(f"[dim]{note}[/dim]", highlight=False) if show else None
                    ),
                )
            except asyncio.CancelledError:
                raise Interrupted(thread_id) from None

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        raise Interrupted(thread_id) from None


def _print_result(result: dict[str, Any], *, json_out: bool, quiet: bool) -> None:
    if json_out:
        import json

        sys.stdout.write(json.dumps(result, default=str) + "\n")
        sys.stdout.flush()
        return
    from rich.console import Console

    from collective.commands.render import render_result

    render_result(Console(), result, thread_id=result.get("thread_id"), quiet=quiet)
