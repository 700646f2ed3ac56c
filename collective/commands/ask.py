"""`collective ask "QUESTION"`: one council run, shown live, then the verdict and its budgets.

The run is checkpointed (SQLite, `checkpoints` in config) on a thread: `--thread ID` continues a
conversation, and a run that was interrupted (Ctrl-C, a dead server) is resumed where it
stopped, without re-running the specialists that had finished. Heavy imports (LangGraph, the
backends) happen inside the functions so `collective --help` stays fast.
"""

from __future__ import annotations

import sqlite3
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from collective import agents
from collective.commands.options import (
    ConfigOption,
    EvidenceOption,
    KbOption,
    RetrievalOption,
    missing_kb,
)

if TYPE_CHECKING:
    from collective.config import CollectiveConfig, EffectiveConfig

__all__ = [
    "CONTRACT_KEYS",
    "CouncilSession",
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
"""The keys `--json` always carries (docs/design.md), with their empty values."""


class AnswerMode(StrEnum):
    """How to answer (collective.modes; bench/README.md has which is most accurate)."""

    council = "council"
    single = "single"
    self_consistency = "self-consistency"
    self_moa = "self-moa"


class Interrupted(Exception):
    """Ctrl-C during a run; carries the thread to resume."""

    def __init__(self, thread_id: str | None) -> None:
        super().__init__(thread_id)
        self.thread_id = thread_id


def fail(message: str, code: int) -> typer.Exit:
    """Print one `error:` line on stderr and return the exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


@dataclass
class RunFailure:
    """What `user_errors` tells the user about the thread of a run that failed.

    Attributes:
        thread_id: The run's thread, set once the run has started (its checkpoint exists).
        resumable: The checkpoint has unfinished work that `--thread ID` resumes.
    """

    thread_id: str | None = None
    resumable: bool = False

    def hint(self, exc: BaseException) -> str:
        """`; thread ID ...` for the error line, empty before the run started."""
        from collective.errors import QuorumError

        if not self.thread_id:
            return ""
        if self.resumable and not isinstance(exc, QuorumError):
            return (
                f"; the run is checkpointed on thread {self.thread_id}: resume it with "
                f"`collective ask --thread {self.thread_id}`"
            )
        return f"; thread {self.thread_id} keeps what finished (see --thread {self.thread_id})"


@contextmanager
def user_errors(*, json_out: bool = False) -> Iterator[RunFailure]:
    """Turn collective's errors and Ctrl-C into one line on stderr and an exit code.

    `CollectiveError` exits with its `exit_code` (2 usage/config, 3 unavailable backends);
    Ctrl-C exits 130 and says how to resume. A failed run names its thread (set
    `thread_id` on the yielded `RunFailure`). With `json_out`, stdout still gets exactly one
    JSON object: `{"error": {...}}` (plus the proposals that arrived, for a quorum failure).
    """
    from collective.errors import CollectiveError, QuorumError

    failure = RunFailure()
    try:
        yield failure
    except CollectiveError as exc:
        extra: dict[str, Any] = {}
        if isinstance(exc, QuorumError):
            extra["proposals"] = exc.proposals
        message = " ".join(str(exc).split()) + failure.hint(exc)
        raise _error_exit(exc, message, json_out, failure, extra) from None
    except (KeyboardInterrupt, Interrupted) as exc:
        thread = exc.thread_id if isinstance(exc, Interrupted) else None
        hint = (
            f"its checkpoint is kept: resume with `collective ask --thread {thread}`"
            if thread
            else "nothing was changed"
        )
        failure.thread_id, failure.resumable = thread, bool(thread)
        error = Interrupted(thread)
        raise _error_exit(error, f"interrupted (Ctrl-C); {hint}", json_out, failure, {}) from None
    except (OSError, sqlite3.Error) as exc:
        environment = storage_error(exc)
        if environment is None:
            raise
        message = str(environment) + failure.hint(environment)
        raise _error_exit(environment, message, json_out, failure, {}) from None


def error_object(exc: BaseException, message: str, thread_id: str | None = None) -> dict[str, Any]:
    """The `{"error": {...}}` object `--json` prints for any failure."""
    code = getattr(exc, "exit_code", 130 if isinstance(exc, Interrupted) else 1)
    error: dict[str, Any] = {"type": type(exc).__name__, "message": message, "exit_code": code}
    if thread_id:
        error["thread_id"] = thread_id
    return {"error": error}


def _error_exit(
    exc: BaseException,
    message: str,
    json_out: bool,
    failure: RunFailure,
    extra: dict[str, Any],
) -> typer.Exit:
    import json

    code = 130 if isinstance(exc, Interrupted) else getattr(exc, "exit_code", 1)
    if json_out:
        typer.echo(json.dumps({**error_object(exc, message, failure.thread_id), **extra}))
    return fail(message, code)


def storage_error(exc: BaseException) -> Exception | None:
    """A `ConfigError` naming the file and what to do for an unusable file or directory.

    Returns None for errors that are not about local files (timeouts, sockets).
    """
    import errno

    from collective.errors import ConfigError

    if isinstance(exc, sqlite3.Error):
        return ConfigError(f"a database collective uses is unusable: {exc}")
    if not isinstance(exc, OSError) or exc.errno not in (
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOSPC,
        errno.ENOTDIR,
        errno.EISDIR,
    ):
        return None
    where = exc.filename or "a file under .collective/"
    return ConfigError(
        f"cannot write {where} ({exc.strerror}) in {Path.cwd()}: run from a writable "
        "directory or put the files elsewhere (COLLECTIVE_KB, COLLECTIVE_CHECKPOINTS, "
        "COLLECTIVE_STORE, COLLECTIVE_USAGE_LOG)"
    )


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
    """Open the checkpointer and L2 store (SQLite files or PostgreSQL), compile the graph.

    `stack` closes them all, and the backends (connections, models loaded in process) too.
    """
    from collective.graph import build_graph
    from collective.memory.store import open_checkpointer, open_store
    from collective.models.registry import close_all

    stack.push_async_callback(close_all)
    with _database(Path(config.checkpoints), "checkpoints", "--checkpoints PATH"):
        saver = await open_checkpointer(config.checkpoints, stack)
    with _database(Path(config.store), "store", "COLLECTIVE_STORE=PATH"):
        store = await open_store(config.store, stack)
    return CouncilSession(build_graph(checkpointer=saver, store=store), store, config)


@contextmanager
def _database(path: Path, key: str, option: str) -> Iterator[None]:
    """Turn an unusable database file (corrupt, unreadable, read-only place) into a clear error.

    The file is never changed: the user decides whether to move it aside.
    """
    from collective.errors import ConfigError

    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        if isinstance(exc, OSError) and storage_error(exc) is None:
            raise
        if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
            raise ConfigError(
                f"{path} is not a database collective can read ({exc}); it was left "
                f"untouched: move it aside (mv {path} {path}.bad) or use another file "
                f"({option}, config `{key}`)"
            ) from None
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f"cannot write {path} ({reason}): run from a writable directory or put the "
            f"file elsewhere ({option}, config `{key}`)"
        ) from None


@dataclass
class RunStart:
    """Where a council run on a thread starts: afresh with a question, or resuming.

    Attributes:
        config: The run's settings: the thread's own stored settings on a resume.
        graph_input: `{"question": ...}`, or None to resume the unfinished run.
        snapshot: The thread's state before the run.
    """

    config: CollectiveConfig
    graph_input: dict[str, Any] | None
    snapshot: Any

    @property
    def restored(self) -> list[tuple[str, str | None]]:
        """`(node, error)` for the work a resume takes from the checkpoint."""
        if self.graph_input is not None:
            return []
        pending = [_ORDER.index(n) for n in self.snapshot.next if n in _ORDER]
        first = min(pending, default=len(_ORDER))
        done: list[tuple[str, str | None]] = [(n, None) for n in _ORDER[:first] if n in _SHOWN]
        if first > _ORDER.index(agents.SPECIALIST) or agents.SPECIALIST in self.snapshot.next:
            proposals = (self.snapshot.values or {}).get("proposals", [])
            done += [(p["member"], p.get("error")) for p in proposals]
        return done


_ORDER = agents.NODES
_SHOWN = (agents.RETRIEVE, agents.PLAN, agents.JUDGE)
"""Nodes with their own row in the live view (specialists have one per member)."""

SETTINGS_KEY = "collective_settings"
"""Checkpoint metadata key with the run's settings (JSON): a resume runs with them."""

_LOCAL_KEYS = ("checkpoints", "store", "usage_log", "telemetry")
"""Settings of this machine, not of the run: a resume keeps the current ones."""

_OPTIONS = {
    "k": "--k",
    "retrieval": "--retrieval",
    "kb": "--kb",
    "review": "--review",
    "evidence": "--evidence",
}


async def start_run(
    session: CouncilSession,
    question: str | None,
    thread_id: str,
    *,
    explicit: Mapping[str, Any] | None = None,
) -> RunStart:
    """Decide between a fresh run and a resume, and the settings it runs with.

    Args:
        session: From `open_session`.
        question: The question; None resumes the thread's unfinished run (so does the same
            question while that run is unfinished).
        thread_id: The conversation thread.
        explicit: Options the user gave on the command line (`k`, `retrieval`, `kb`,
            `review`, `config`); on a resume, one that differs from the thread's is refused.

    Raises:
        ConfigError: No question and nothing to resume, or a conflicting option on resume.
    """
    from collective.errors import ConfigError

    snapshot = await session.graph.aget_state({"configurable": {"thread_id": thread_id}})
    pending = bool(snapshot.next)
    previous = (snapshot.values or {}).get("question")
    if question is None or (pending and question == previous):
        if not pending:
            raise ConfigError(
                f"thread {thread_id} has no unfinished run to resume; give a question"
            )
        config = _thread_settings(snapshot, session.config, explicit or {}, thread_id)
        return RunStart(config, None, snapshot)
    return RunStart(session.config, {"question": question}, snapshot)


def _thread_settings(
    snapshot: Any, current: CollectiveConfig, explicit: Mapping[str, Any], thread_id: str
) -> CollectiveConfig:
    """The settings stored with the thread's unfinished run (`current` for older threads)."""
    import json

    from pydantic import ValidationError

    from collective.config import CollectiveConfig
    from collective.errors import ConfigError

    raw = (snapshot.metadata or {}).get(SETTINGS_KEY)
    if not raw:
        return current
    fields = CollectiveConfig.model_fields
    data = {k: v for k, v in json.loads(raw).items() if k in fields and k not in _LOCAL_KEYS}
    try:
        stored = CollectiveConfig(**data, **{k: getattr(current, k) for k in _LOCAL_KEYS})
    except ValidationError as exc:
        raise ConfigError(
            f"thread {thread_id} was started with settings this version refuses ({exc}); "
            "ask the question again on a new thread"
        ) from None
    keys = [k for k in fields if k not in _LOCAL_KEYS] if "config" in explicit else list(explicit)
    then, now = stored.model_dump(mode="json"), current.model_dump(mode="json")
    then["k"], now["k"] = stored.members, current.members
    conflicts = [k for k in keys if k in then and then[k] != now[k]]
    if conflicts:
        changed = ", ".join(
            f"{k} {json.dumps(then[k])} (now {json.dumps(now[k])})" for k in conflicts
        )
        given = ", ".join(
            _OPTIONS.get(k, "--config")
            for k in dict.fromkeys(k if k in explicit else "config" for k in conflicts)
        )
        raise ConfigError(
            f"thread {thread_id} was started with {changed}; a resume runs with the thread's "
            f"own settings: leave out {given}, or start afresh on a new thread"
        )
    return stored


async def run_council(
    session: CouncilSession,
    question: str | None,
    thread_id: str,
    *,
    on_event: Callable[[Mapping[str, Any]], None] = lambda event: None,
    on_finished: Callable[[str, str | None], None] = lambda node, error: None,
    on_note: Callable[[str], None] = lambda note: None,
    context: Any = None,
    start: RunStart | None = None,
) -> dict[str, Any]:
    """Run the council on `thread_id` (or resume its unfinished run) and return the output.

    The run's settings are stored with its checkpoints, so that a resume uses them.

    Args:
        session: From `open_session`.
        question: The question; None resumes the thread's unfinished run.
        thread_id: The conversation thread (checkpoints and memory live there).
        on_event: Receives every custom stream event (progress, budget reports), a `token`
            event (`node`, `text`) per piece of a model's answer as it is written, and a
            `restored` progress event for each node a resume takes from the checkpoint.
        on_finished: `(node, error)` when a node's state update lands (specialists: their
            member name and error).
        on_note: Receives notes for the user (e.g. an abandoned unfinished run).
        context: The `CouncilContext` (default: from the run's settings).
        start: From `start_run` (default: decided here, with no explicit options).

    Raises:
        ConfigError: No question and nothing to resume.
        CollectiveError: Whatever the council raises (unavailable backends, quorum, ...).
    """
    import json

    if start is None:
        start = await start_run(session, question, thread_id)
    ctx = context if context is not None else start.config.council_context()
    settings = json.dumps(start.config.model_dump(mode="json"))
    config = {"configurable": {"thread_id": thread_id}, "metadata": {SETTINGS_KEY: settings}}
    previous = (start.snapshot.values or {}).get("question")
    if start.graph_input is None:
        on_note(f"resuming the unfinished run of thread {thread_id}: {previous!r}")
        for node, error in start.restored:
            status = "failed" if error else "restored"
            on_event({"type": "progress", "node": node, "status": status, "error": error})
    elif start.snapshot.next:
        on_note(f"thread {thread_id} had an unfinished run for {previous!r}; starting afresh")
    final: dict[str, Any] = {}
    async for mode, chunk in session.graph.astream(
        start.graph_input,
        config,
        context=ctx,
        stream_mode=["updates", "custom", "values", "messages"],
        # Each step's checkpoint is written before the next starts (LangGraph's default writes
        # it beside the next step): a quit at once (Ctrl-C twice) keeps all that finished.
        durability="sync",
    ):
        if mode == "custom":
            on_event(chunk)
        elif mode == "messages":
            message, meta = chunk  # a piece of a model's answer, as it is written
            if message.type == "AIMessageChunk" and meta.get("agent") and message.content:
                on_event({"type": "token", "node": meta["agent"], "text": message.text})
        elif mode == "values":
            final = dict(chunk)
        elif mode == "updates":
            for node, update in chunk.items():
                if node == "specialist" and isinstance(update, dict):
                    for proposal in update.get("proposals") or []:
                        on_finished(proposal["member"], proposal.get("error"))
                elif node in _SHOWN:
                    on_finished(node, None)
    # `values` carries every channel (chunks, memory, plan, ...): keep the output's keys only.
    from collective.graph.state import CouncilOutput

    keys = CouncilOutput.__required_keys__ | CouncilOutput.__optional_keys__
    result = {**CONTRACT_KEYS, **{k: v for k, v in final.items() if k in keys}}
    result["thread_id"] = thread_id
    return mark_cut_answers(result)


def mark_cut_answers(result: dict[str, Any]) -> dict[str, Any]:
    """Flag answers that stopped at their output cap (`finish_reason` `length`).

    Adds `finish_reason` and `answer_cut` for the verdict (the judge's last call) and the same
    two keys to each proposal, from the budget report of its call.
    """
    reports = {b["node"]: b for b in result.get("budgets") or []}  # the last call per node
    judge = reports.get("judge") or {}
    result["finish_reason"] = judge.get("finish_reason")
    result["answer_cut"] = judge.get("finish_reason") == "length"
    proposals = []
    for proposal in result.get("proposals") or []:
        reason = (reports.get(proposal["member"]) or {}).get("finish_reason")
        proposals.append({**proposal, "finish_reason": reason, "answer_cut": reason == "length"})
    result["proposals"] = proposals
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
    retrieval: RetrievalOption = None,
    evidence: EvidenceOption = None,
    kb: KbOption = None,
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
    checkpoints: Annotated[
        str | None,
        typer.Option(
            "--checkpoints",
            help="Checkpoint database: a SQLite file (default: .collective/checkpoints.sqlite) "
            "or a postgresql:// URL.",
        ),
    ] = None,
    mode: Annotated[
        AnswerMode,
        typer.Option(
            "--mode",
            help="council (the graph), or the judge's model alone: single (one call), "
            "self-consistency (K+1 samples, the most consistent), self-moa (K samples + judge).",
        ),
    ] = AnswerMode.council,
) -> None:
    """Ask the council one question: live progress, then the verdict, citations and budgets."""
    from collective.question import is_blank

    with user_errors(json_out=json_out) as failure:
        if question is not None and is_blank(question):
            raise _usage('the question is empty; ask something, e.g. collective ask "PETG or ASA?"')
        if question is None and thread is None:
            raise _usage('no question; use collective ask "QUESTION" (or --thread ID to resume)')
        if no_kb := missing_kb(kb):
            raise _usage(no_kb)
        overrides: dict[str, Any] = {
            "k": k,
            "retrieval": retrieval,
            "kb": str(kb) if kb else None,
            "review": review,
            "evidence": evidence,
        }
        explicit = {key: value for key, value in overrides.items() if value is not None}
        if config is not None:
            explicit["config"] = config
        effective = load_effective(config, {**overrides, "checkpoints": checkpoints})
        if mode is not AnswerMode.council:
            if question is None:
                raise _usage(f"--mode {mode.value} answers a new question; --thread needs council")
            result = _run_mode(effective.config, question, mode)
            _print_result(result, json_out=json_out, quiet=quiet)
            return
        thread_id = thread or uuid.uuid4().hex[:12]
        result = _run_with_progress(
            effective.config,
            question,
            thread_id,
            explicit=explicit,
            failure=failure,
            json_out=json_out,
            quiet=quiet,
        )
    _print_result(result, json_out=json_out, quiet=quiet)


def _run_mode(config: CollectiveConfig, question: str, mode: AnswerMode) -> dict[str, Any]:
    """One question in a non-council mode (no graph, no thread): the output's keys."""
    import asyncio

    from collective.models.registry import close_all
    from collective.modes import run_mode

    async def main() -> Any:
        try:
            ctx = config.council_context()
            return await run_mode(question, mode.value, ctx)
        finally:
            await close_all()

    result = asyncio.run(main())
    return mark_cut_answers(
        {
            **CONTRACT_KEYS,
            "answer": result.answer,
            "citations": result.citations,
            "unknown_citations": result.unknown_citations,
            "proposals": result.proposals,
            "evidence": result.evidence,
            "citation_support": result.citation_support,
            "timings": {"total_ms": result.wall_s * 1000},
            "notes": [f"mode {mode.value}: {result.calls} model calls, no council graph"],
        }
    )


def _usage(message: str) -> Exception:
    from collective.errors import ConfigError

    return ConfigError(message)


async def preflight(config: CollectiveConfig) -> None:
    """Before a run: every server it needs answers and serves its model (seconds, not a run).

    The first checks of `collective smoke` (health, then `/props` or `/api/tags`), without its
    council run. In-process models need no check: their GGUF file is checked when made.

    Raises:
        BackendUnavailable: With each failing role, server and the server's own answer.
    """
    from collective.errors import BackendUnavailable
    from collective.models.registry import backend_from_spec

    roles: dict[str, list[str]] = {}
    extra = {"rewriter": config.rewriter, "summarizer": config.summarizer}
    named = {**config.role_backends(), **{r: [s] for r, s in extra.items() if s}}
    del named["chat"]
    for role, specs in named.items():
        for spec in specs:
            roles.setdefault(spec, [])
            if role not in roles[spec]:
                roles[spec].append(role)
    problems = []
    failed: set[str] = set()
    for spec, used_by in roles.items():
        backend = backend_from_spec(spec)
        if backend.in_process:
            continue
        health = await backend.health()
        check = await backend.model_check() if health.ok else None
        detail = (
            health.detail if not health.ok else check.detail if check and not check.ok else None
        )
        if detail:
            problems.append(f"{'/'.join(used_by)} {spec}: {detail}")
            failed.add(spec)
    judges = config.judges
    if len(judges) > 1 and not set(judges) <= failed:
        # A judge list falls back at run time (each failure noted): one working judge will do.
        backups = {s for s in judges if roles.get(s) == ["judge"]}
        problems = [p for p in problems if not any(p.startswith(f"judge {s}:") for s in backups)]
    if problems:
        raise BackendUnavailable(
            "preflight failed, nothing was run: "
            + "; ".join(problems)
            + "; `collective smoke` checks the whole deployment"
        )


def _run_with_progress(
    config: CollectiveConfig,
    question: str | None,
    thread_id: str,
    *,
    explicit: Mapping[str, Any],
    failure: RunFailure,
    json_out: bool,
    quiet: bool,
) -> dict[str, Any]:
    import asyncio

    from rich.console import Console

    from collective.commands.render import ProgressView
    from collective.errors import CollectiveError

    err = Console(stderr=True)
    # Progress goes to stderr; with --json only where a person watches it.
    show = not quiet and (not json_out or err.is_terminal)

    async def main() -> dict[str, Any]:
        stop_on_ctrl_c(err)
        async with AsyncExitStack() as stack:
            session = await open_session(config, stack)
            start = await start_run(session, question, thread_id, explicit=explicit)
            await preflight(start.config)
            view = ProgressView(start.config.members, err)
            if show:
                stack.enter_context(view)
            failure.thread_id = thread_id
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
                    start=start,
                )
            except asyncio.CancelledError:
                raise Interrupted(thread_id) from None
            except CollectiveError:
                state = await session.graph.aget_state({"configurable": {"thread_id": thread_id}})
                failure.resumable = bool(state.next)
                raise

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        raise Interrupted(thread_id) from None


def stop_on_ctrl_c(err: Any) -> None:
    """Ctrl-C says "stopping..." at once and cancels the run; a second one quits at once.

    Call inside the running event loop (its main task is what Ctrl-C cancels).
    """
    import asyncio
    import os
    import signal

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    pressed: list[bool] = []

    def on_sigint() -> None:
        if pressed:
            sys.stderr.write("error: interrupted (Ctrl-C twice); finished work is checkpointed\n")
            sys.stderr.flush()
            os._exit(130)
        pressed.append(True)
        err.print("[yellow]stopping... (Ctrl-C again to quit at once)[/yellow]", highlight=False)
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
        return


def _print_result(result: dict[str, Any], *, json_out: bool, quiet: bool) -> None:
    if json_out:
        import json

        sys.stdout.write(json.dumps(result, default=str) + "\n")
        sys.stdout.flush()
        return
    from rich.console import Console

    from collective.commands.render import render_result

    console = Console()
    render_result(console, result, thread_id=result.get("thread_id"), quiet=quiet)
    reports = {b["node"]: b for b in result.get("budgets") or []}
    cuts = [("the verdict", "judge", "judge")] if result.get("answer_cut") else []
    cuts += [
        (p["member"], p["member"], "specialist") for p in result["proposals"] if p["answer_cut"]
    ]
    for who, node, role in cuts:
        cap = (reports.get(node) or {}).get("max_output_tokens", "?")
        console.print(
            f"[bold yellow]✂ {who} was cut at its output cap ({cap} tokens, finish_reason "
            f"length): it ends mid-sentence; raise output_caps.{role} in the config[/]",
            highlight=False,
        )
