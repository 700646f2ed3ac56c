"""The run as a library: open a session, check the servers, start or resume a run, stream it.

`ask` does what `collective ask` does, without printing: it opens the checkpointer and store,
decides between a fresh run and a resume (a resume runs with the settings stored with the
thread), checks every server the run needs (`preflight`), streams the council and returns the
output contract (`CONTRACT_KEYS`, docs/design.md). `collective ask`, `chat` and `smoke` are
built from the same pieces; an embedding app calls `ask` (or the pieces) the same way:

```python
effective = load_settings(None, {"k": 3})
result = asyncio.run(ask(effective.config, "PETG or ASA?"))
```

Heavy imports (LangGraph, the backends) happen inside the functions so `collective --help`
stays fast.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collective import agents
from collective.errors import ConfigError

if TYPE_CHECKING:
    from collective.config import CollectiveConfig, EffectiveConfig
    from collective.modes import ModeResult

__all__ = [
    "CONTRACT_KEYS",
    "SETTINGS_KEY",
    "CouncilSession",
    "RunStart",
    "RunStatus",
    "SettingsConflict",
    "Watch",
    "answer_in_mode",
    "ask",
    "load_settings",
    "mark_cut_answers",
    "mode_output",
    "open_session",
    "preflight",
    "run_council",
    "start_run",
    "storage_error",
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
"""The keys a run's output always carries (docs/design.md), with their empty values."""

SETTINGS_KEY = "collective_settings"
"""Checkpoint metadata key with the run's settings (JSON): a resume runs with them."""


class SettingsConflict(ConfigError):
    """A resume was asked with settings that differ from those stored with its thread.

    Attributes:
        thread_id: The thread.
        changes: Setting name -> `(the thread's value, the value asked for)`, as JSON values.
    """

    def __init__(self, thread_id: str, changes: Mapping[str, tuple[Any, Any]]) -> None:
        self.thread_id = thread_id
        self.changes = dict(changes)
        super().__init__(self.explain({k: f"the setting {k}" for k in self.changes}))

    def explain(self, given: Mapping[str, str]) -> str:
        """The message, naming how each conflicting setting was given (`given[key]`)."""
        import json

        changed = ", ".join(
            f"{k} {json.dumps(then)} (now {json.dumps(now)})"
            for k, (then, now) in self.changes.items()
        )
        leave = ", ".join(dict.fromkeys(given.get(k, f"the setting {k}") for k in self.changes))
        return (
            f"thread {self.thread_id} was started with {changed}; a resume runs with the "
            f"thread's own settings: leave out {leave}, or start afresh on a new thread"
        )


def load_settings(config: Path | None, overrides: Mapping[str, Any]) -> EffectiveConfig:
    """The effective configuration with command-line `overrides`; sets up telemetry."""
    from collective.config import load_config

    effective = load_config(config, overrides)
    if effective.config.telemetry != "none":
        from collective.telemetry import configure_telemetry

        configure_telemetry(effective.config.telemetry)
    return effective


def storage_error(exc: BaseException) -> Exception | None:
    """A `ConfigError` naming the file and what to do for an unusable file or directory.

    Returns None for errors that are not about local files (timeouts, sockets).
    """
    import errno

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
        pending = [agents.NODES.index(n) for n in self.snapshot.next if n in agents.NODES]
        first = min(pending, default=len(agents.NODES))
        planned = bool((self.snapshot.values or {}).get("plan"))  # no planner: no plan row
        done: list[tuple[str, str | None]] = [
            (n, None)
            for n in agents.NODES[:first]
            if n in agents.OWN_ROW and (n != agents.PLAN or planned)
        ]
        if first > agents.NODES.index(agents.SPECIALIST) or agents.SPECIALIST in self.snapshot.next:
            proposals = (self.snapshot.values or {}).get("proposals", [])
            done += [(p["member"], p.get("error")) for p in proposals]
        return done


async def start_run(
    session: CouncilSession,
    question: str | None,
    thread_id: str,
    *,
    explicit: Collection[str] = (),
    abandon: bool = False,
) -> RunStart:
    """Decide between a fresh run and a resume, and the settings it runs with.

    Args:
        session: From `open_session`.
        question: The question; None resumes the thread's unfinished run (so does the same
            question while that run is unfinished).
        thread_id: The conversation thread.
        explicit: The settings the caller chose on purpose (names: `k`, `retrieval`, ...);
            on a resume, one that differs from the thread's is refused (`SettingsConflict`).
        abandon: A new question may drop the thread's unfinished run (else it is refused).

    Raises:
        ConfigError: No question and nothing to resume, a conflicting option on resume, or a
            new question on a thread whose run is unfinished without `abandon`.
    """
    snapshot = await session.graph.aget_state({"configurable": {"thread_id": thread_id}})
    pending = bool(snapshot.next)
    previous = (snapshot.values or {}).get("question")
    if question is None or (pending and question == previous):
        if not pending:
            raise ConfigError(
                f"thread {thread_id} has no unfinished run to resume; give a question"
            )
        config = _thread_settings(snapshot, session.config, explicit, thread_id)
        return RunStart(config, None, snapshot)
    if pending and not abandon:
        raise ConfigError(
            f"thread {thread_id} has an unfinished run for {previous!r}; finish it with "
            f"`collective ask --thread {thread_id}`, or drop it and ask this question with "
            "--abandon"
        )
    return RunStart(session.config, {"question": question}, snapshot)


def _thread_settings(
    snapshot: Any, current: CollectiveConfig, explicit: Collection[str], thread_id: str
) -> CollectiveConfig:
    """The settings stored with the thread's unfinished run (`current` for older threads)."""
    import json

    from pydantic import ValidationError

    from collective.config import DEPRECATED_KEYS, MACHINE_KEYS, CollectiveConfig

    raw = (snapshot.metadata or {}).get(SETTINGS_KEY)
    if not raw:
        return current
    fields = CollectiveConfig.model_fields
    known = {*fields, *DEPRECATED_KEYS}  # a thread of an older version: its old names
    data = {k: v for k, v in json.loads(raw).items() if k in known and k not in MACHINE_KEYS}
    try:
        stored = CollectiveConfig(**data, **{k: getattr(current, k) for k in MACHINE_KEYS})
    except ValidationError as exc:
        raise ConfigError(
            f"thread {thread_id} was started with settings this version refuses ({exc}); "
            "ask the question again on a new thread"
        ) from None
    then, now = stored.model_dump(mode="json"), current.model_dump(mode="json")
    then["k"], now["k"] = stored.members, current.members
    changes = {k: (then[k], now[k]) for k in explicit if k in then and then[k] != now[k]}
    if changes:
        raise SettingsConflict(thread_id, changes)
    return stored


def _ignore(*args: Any) -> None:
    return None


@dataclass
class Watch:
    """What a caller hears while a run goes (every callback defaults to nothing).

    Attributes:
        on_event: Every custom stream event (progress, budget reports), a `token` event
            (`node`, `text`) per piece of a model's answer as it is written, and a `restored`
            progress event for each node a resume takes from the checkpoint.
        on_finished: `(node, error)` when a node's state update lands (specialists: their
            member name and error).
        on_note: Notes for the user (e.g. the run that a resume continues).
    """

    on_event: Callable[[Mapping[str, Any]], None] = _ignore
    on_finished: Callable[[str, str | None], None] = _ignore
    on_note: Callable[[str], None] = _ignore


async def run_council(
    session: CouncilSession,
    question: str | None,
    thread_id: str,
    *,
    watch: Watch | None = None,
    context: Any = None,
    start: RunStart | None = None,
) -> dict[str, Any]:
    """Run the council on `thread_id` (or resume its unfinished run) and return the output.

    The run's settings are stored with its checkpoints, so that a resume uses them.

    Args:
        session: From `open_session`.
        question: The question; None resumes the thread's unfinished run.
        thread_id: The conversation thread (checkpoints and memory live there).
        watch: What hears the run's events, finished nodes and notes.
        context: The `CouncilContext` (default: from the run's settings).
        start: From `start_run` (default: decided here, with no explicit options).

    Raises:
        ConfigError: No question and nothing to resume, or a new question over an unfinished
            run (`start_run`).
        CollectiveError: Whatever the council raises (unavailable backends, quorum, ...).
    """
    import json

    watch = watch or Watch()
    if start is None:
        start = await start_run(session, question, thread_id)
    ctx = context if context is not None else start.config.council_context()
    settings = json.dumps(start.config.model_dump(mode="json"))
    config = {"configurable": {"thread_id": thread_id}, "metadata": {SETTINGS_KEY: settings}}
    previous = (start.snapshot.values or {}).get("question")
    if start.graph_input is None:
        watch.on_note(f"resuming the unfinished run of thread {thread_id}: {previous!r}")
        for node, error in start.restored:
            status = "failed" if error else "restored"
            watch.on_event({"type": "progress", "node": node, "status": status, "error": error})
    elif start.snapshot.next:
        watch.on_note(f"thread {thread_id}: the unfinished run for {previous!r} is dropped")
    final: dict[str, Any] = {}
    faults: list[str] = []  # replicas lost mid-answer: their failed call left no report
    async for mode, chunk in session.graph.astream(
        start.graph_input,
        config,
        context=ctx,
        stream_mode=["updates", "custom", "values", "messages"],
        # Each step's checkpoint is written before the next starts (LangGraph's default writes
        # it beside the next step): a quit at once (Ctrl-C twice) keeps all that finished.
        durability="sync",
    ):
        if mode == "values":
            final = dict(chunk)
        else:
            if mode == "custom" and chunk.get("type") == "fault":
                faults.append(f"{chunk.get('node')}: {chunk.get('message')}")
            _hear(mode, chunk, watch)
    return _output(final, thread_id, faults)


def _hear(mode: str, chunk: Any, watch: Watch) -> None:
    """Pass one streamed `custom`, `messages` or `updates` chunk to `watch`."""
    if mode == "custom":
        watch.on_event(chunk)
    elif mode == "messages":
        message, meta = chunk  # a piece of a model's answer, as it is written
        if message.type == "AIMessageChunk" and meta.get("agent") and message.content:
            watch.on_event({"type": "token", "node": meta["agent"], "text": message.text})
    elif mode == "updates":
        for node, update in chunk.items():
            if node == agents.SPECIALIST and isinstance(update, dict):
                for proposal in update.get("proposals") or []:
                    watch.on_finished(proposal["member"], proposal.get("error"))
            elif node in agents.OWN_ROW and update:  # a plan node without a planner: none
                watch.on_finished(node, None)


def _output(final: Mapping[str, Any], thread_id: str, faults: Sequence[str] = ()) -> dict[str, Any]:
    """The output contract from the run's last `values` (every channel: keep the output's).

    Its `notes` name every replica the run lost (`faults`, and each budget report's), so the
    plain output, `--quiet`'s notes line and `--json` all say it.
    """
    from collective.graph.state import CouncilOutput

    keys = CouncilOutput.__required_keys__ | CouncilOutput.__optional_keys__
    result = {**CONTRACT_KEYS, **{k: v for k, v in final.items() if k in keys}}
    result["thread_id"] = thread_id
    reported = [
        f"{b['node']}: {f['message']}" for b in result["budgets"] for f in b.get("faults") or []
    ]
    lost = [*faults, *reported]
    if lost:
        result["notes"] = list(dict.fromkeys([*(result.get("notes") or []), *lost]))
    return mark_cut_answers(result)


def mark_cut_answers(result: dict[str, Any]) -> dict[str, Any]:
    """Flag answers that stopped at their output cap (`finish_reason` `length`).

    Adds `finish_reason` and `answer_cut` for the verdict (the judge's last call) and the same
    two keys to each proposal, from the proposal (samples answered by one call) or else the
    budget report of its call.
    """
    reports = {b["node"]: b for b in result.get("budgets") or []}  # the last call per node
    judge = reports.get(agents.JUDGE) or {}
    result["finish_reason"] = judge.get("finish_reason")
    result["answer_cut"] = judge.get("finish_reason") == "length"
    proposals = []
    for proposal in result.get("proposals") or []:
        reason = proposal.get("finish_reason") or (reports.get(proposal["member"]) or {}).get(
            "finish_reason"
        )
        proposals.append({**proposal, "finish_reason": reason, "answer_cut": reason == "length"})
    result["proposals"] = proposals
    return result


async def answer_in_mode(config: CollectiveConfig, question: str, mode: str) -> dict[str, Any]:
    """One question in a non-council mode (`collective.modes`; no thread): the output contract."""
    from collective.models.registry import close_all
    from collective.modes import run_mode

    try:
        result = await run_mode(question, mode, config.council_context())  # type: ignore[arg-type]
    finally:
        await close_all()
    return mode_output(result, mode)


def mode_output(result: ModeResult, mode: str) -> dict[str, Any]:
    """The output contract of one answer in a non-council mode (`collective.modes.run_mode`)."""
    return mark_cut_answers(
        {
            **CONTRACT_KEYS,
            "answer": result.answer,
            "citations": result.citations,
            "unknown_citations": result.unknown_citations,
            "proposals": result.proposals,
            "evidence": result.evidence,
            "citation_support": result.citation_support,
            **result.confidence,
            "timings": {"total_ms": result.wall_s * 1000},
            "notes": [
                f"mode {mode}: {result.calls} model calls, no council graph",
                *_escalation(result.escalated),
            ],
        }
    )


def _escalation(escalated: bool | None) -> list[str]:
    """What `adaptive` did (docs/adaptive.md); nothing in the other modes."""
    if escalated is None:
        return []
    if escalated:
        return ["adaptive: the judge's own answer was unsure: its model's samples were weighed"]
    return ["adaptive: the judge's own answer was confident: no sample was drawn"]


async def preflight(config: CollectiveConfig) -> list[str]:
    """Before a run: every server it needs answers and serves its model (seconds, not a run).

    The first checks of `collective smoke` (health, then the model), without its council run.
    In-process models need no check: their GGUF file is checked when made.

    Returns:
        A note for each replica that does not answer while another of its set does (the run
        goes on without it): the roles, the server, what failed, what the run does instead.

    Raises:
        BackendUnavailable: With each failing role, server and the server's own answer.
    """
    from collective.errors import BackendUnavailable
    from collective.models.registry import backend_from_spec
    from collective.models.replicas import down_replicas
    from collective.telemetry import record_preflight_fault

    roles = _servers_by_spec(config)
    failed = {spec: detail for spec in roles if (detail := await _server_problem(spec))}
    problems = [f"{'/'.join(roles[spec])} {spec}: {detail}" for spec, detail in failed.items()]
    judges = config.judges
    if len(judges) > 1 and not set(judges) <= set(failed):
        # A judge list falls back at run time (each failure noted): one working judge will do.
        backups = {s for s in judges if roles.get(s) == ["judge"]}
        problems = [p for p in problems if not any(p.startswith(f"judge {s}:") for s in backups)]
    if problems:
        raise BackendUnavailable(
            "preflight failed, nothing was run: "
            + "; ".join(problems)
            + "; `collective smoke` checks the whole deployment"
        )
    notes = []
    for spec, used_by in roles.items():
        for fault in await down_replicas(backend_from_spec(spec)):
            notes.append(f"{'/'.join(used_by)}: {fault.describe()}")
            record_preflight_fault(used_by, fault.to_dict())
    return notes


def _servers_by_spec(config: CollectiveConfig) -> dict[str, list[str]]:
    """Every backend spec a council run calls -> the roles that use it (chat left out)."""
    roles: dict[str, list[str]] = {}
    extra = {"rewriter": config.rewriter, "summarizer": config.summarizer}
    named = {**config.role_backends(), **{r: [s] for r, s in extra.items() if s}}
    del named["chat"]
    for role, specs in named.items():
        for spec in specs:
            used_by = roles.setdefault(spec, [])
            if role not in used_by:
                used_by.append(role)
    return roles


async def _server_problem(spec: str) -> str | None:
    """What is wrong with the server of `spec` (down, or not serving its model); None: fine.

    A model in process needs no check: its GGUF file is checked when the backend is made.
    """
    from collective.models.registry import backend_from_spec

    backend = backend_from_spec(spec)
    if backend.in_process:
        return None
    health = await backend.health()
    if not health.ok:
        return health.detail
    check = await backend.model_check()
    return None if check.ok else check.detail


@dataclass
class RunStatus:
    """How far a run got, for what an error says about its thread.

    Attributes:
        thread_id: The run's thread, set once the run has started (its checkpoint exists).
        resumable: The checkpoint has unfinished work that `--thread ID` resumes.
    """

    thread_id: str | None = None
    resumable: bool = False


async def ask(
    config: CollectiveConfig,
    question: str | None,
    thread_id: str | None = None,
    *,
    explicit: Collection[str] = (),
    abandon: bool = False,
    on_start: Callable[[RunStart], Watch | None] | None = None,
    status: RunStatus | None = None,
) -> dict[str, Any]:
    """Ask the council `question` on `thread_id` (or resume it): what `collective ask` runs.

    Opens the session, decides the run's start and settings (`start_run`), checks the servers
    (`preflight`), runs the council and closes everything.

    Args:
        config: The effective settings (`load_settings(...).config`).
        question: The question; None resumes the thread's unfinished run.
        thread_id: The conversation thread; default a new one.
        explicit: Settings the caller chose on purpose (refused on a resume when they differ
            from the thread's: `SettingsConflict`).
        abandon: A new question may drop the thread's unfinished run.
        on_start: Called once the servers passed, with how the run starts; returns what
            watches the run.
        status: Filled in as the run goes (its thread once started; resumable on failure).

    Raises:
        CollectiveError: Usage, unavailable servers, or whatever the council raises.
    """
    from collective.errors import CollectiveError

    thread_id = thread_id or uuid.uuid4().hex[:12]
    status = status or RunStatus()
    async with AsyncExitStack() as stack:
        session = await open_session(config, stack)
        start = await start_run(session, question, thread_id, explicit=explicit, abandon=abandon)
        down = await preflight(start.config)
        watch = (on_start(start) if on_start else None) or Watch()
        for note in down:
            watch.on_note(note)
        status.thread_id = thread_id
        try:
            result = await run_council(session, question, thread_id, watch=watch, start=start)
        except CollectiveError:
            state = await session.graph.aget_state({"configurable": {"thread_id": thread_id}})
            status.resumable = bool(state.next)
            raise
        if down:
            result["notes"] = list(dict.fromkeys([*down, *(result.get("notes") or [])]))
        return result
