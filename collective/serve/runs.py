"""Council runs for the servers: one open session, admitted runs, their events, cancellation.

`Councils` is what `collective serve` and `collective mcp` share. It opens the checkpointer, the
memory store and the graph once (`collective.session.open_session`) and starts each question as
a `Run`: an asyncio task of `collective.session.run_council` (or `collective.modes.run_mode`
for the modes that are no graph) whose `Watch` puts every event into the run's queue: the same
events the CLI's live view reads (`progress`, `token`, `budget_event`, `fault`, `tool_call`,
...), plus `note` and `finished`, and at the end `result` or `error`.

At most `max_concurrent` runs go at once: one more is refused (`Busy`), never queued. A run
holds its place until its task has ended, so that a cancelled run's model calls have stopped
before another takes its place.

Threads: a request names its thread (a header or the OpenAI `user` field); the council's thread
is a digest of that name, so that clients' names never reach the checkpointer's keys, and the
thread is also the run's memory `user_id`, so that long-term memory recalled with the `user`
scope stays within the thread. A thread the server has not seen starts from the earlier turns
the request carries (a chat client sends its whole conversation each time); a known thread's
memory is its own, and the earlier turns sent again are not read twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collective.agents import GRAPH_MODES, Mode
from collective.errors import CollectiveError, ConfigError

if TYPE_CHECKING:
    from collective.config import CollectiveConfig
    from collective.serve.settings import ServeSettings
    from collective.session import CouncilSession

__all__ = [
    "Ask",
    "Busy",
    "Cancelled",
    "Councils",
    "ModelEntry",
    "Run",
    "ThreadBusy",
    "thread_key",
    "usage_of",
]

DEFAULT_COUNCIL = "collective"
"""The model id of the configured council (named councils add their own)."""


class ThreadBusy(Exception):
    """A run on the thread is going: a thread answers one question at a time."""

    def __init__(self, thread: str) -> None:
        super().__init__(
            f"thread {thread!r} is answering another question; wait for it (or cancel it), "
            "or ask on another thread"
        )


class Busy(Exception):
    """As many councils run as the server allows: the caller is to come back later."""

    def __init__(self, running: int, retry_after_s: int) -> None:
        super().__init__(
            f"{running} council(s) are running, the most this server runs at once; "
            f"try again in {retry_after_s} s"
        )
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class ModelEntry:
    """One model id a client may name: a council in one answer mode.

    Attributes:
        id: `collective`, `collective-single`, `NAME`, `NAME-self-moa`, ...
        council: The council's name (`collective`: the configured one).
        mode: The answer mode.
    """

    id: str
    council: str
    mode: Mode

    @property
    def threaded(self) -> bool:
        """A council graph mode: a thread, memory and live events."""
        return self.mode in GRAPH_MODES


@dataclass(frozen=True)
class Ask:
    """One question for a council.

    Attributes:
        question: The question (the last user message).
        model: The model id (`ModelEntry.id`).
        thread: The client's name for its thread; None starts a new one.
        earlier: The conversation before the question, `(role, text)` with role `user` or
            `assistant`; it seeds the memory of a thread the server has not seen.
        k: Specialists (None: the council's own number).
        retrieval: The retrieval profile (None: the council's own).
    """

    question: str
    model: str = DEFAULT_COUNCIL
    thread: str | None = None
    earlier: Sequence[tuple[str, str]] = ()
    k: int | None = None
    retrieval: str | None = None


@dataclass
class Run:
    """A council run in progress: its events as they come, then its result or error.

    Attributes:
        id: The run's id (the page cancels it by this).
        thread: The client's name of the thread (None for the modes that have none).
        thread_id: The council's thread (`thread_key(thread)`).
        entry: The model it answers as.
        members: Specialists it runs.
        planned: Whether a planner plans.
        events: Every event, in order; the last is `result` or `error`.
    """

    id: str
    thread: str | None
    thread_id: str | None
    entry: ModelEntry
    members: int
    planned: bool
    events: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None

    def put(self, event: Mapping[str, Any]) -> None:
        """Queue one event (from the run's own task: no wait, no bound but the run's length)."""
        self.events.put_nowait(dict(event))

    def cancel(self) -> None:
        """Stop the run: its task is cancelled, which cancels its model calls."""
        if self.task is not None and not self.task.done():
            self.task.cancel()

    async def outcome(self) -> dict[str, Any]:
        """The run's result (every event before it dropped).

        Raises:
            BaseException: What the run raised.
        """
        while True:
            event = await self.events.get()
            if event["type"] == "result":
                return dict(event["result"])
            if event["type"] == "error":
                raise event["exception"]


def usage_of(result: Mapping[str, Any]) -> dict[str, int]:
    """OpenAI's `usage` of a run: the tokens of every model call it made (its budget reports)."""
    if "usage" in result:
        return dict(result["usage"])
    budgets = list(result.get("budgets") or [])
    prompt = sum(int(b.get("prompt_tokens") or 0) for b in budgets)
    completion = sum(int(b.get("output_tokens") or 0) for b in budgets)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class Councils:
    """The councils a server answers with, and their runs (see the module's docstring).

    Args:
        session: The open session of the configured council (its graph and store serve
            every council: the graph holds no settings).
        configs: Council name -> its settings (`collective` first).
        settings: The server's limits.
    """

    def __init__(
        self,
        session: CouncilSession,
        configs: Mapping[str, CollectiveConfig],
        settings: ServeSettings,
    ) -> None:
        self.session = session
        self.configs = dict(configs)
        self.settings = settings
        self.runs: dict[str, Run] = {}
        self.created = int(time.time())
        self._variants: dict[tuple[str, Mode, int | None, str | None], CollectiveConfig] = {}

    @classmethod
    async def open(
        cls,
        config: CollectiveConfig,
        settings: ServeSettings,
        stack: AsyncExitStack,
        *,
        named: Mapping[str, CollectiveConfig] | None = None,
    ) -> Councils:
        """Open the session (closed with `stack`, backends included) for `config`'s council.

        Args:
            config: The configured council's settings (checkpoints, store, KB: the machine's).
            settings: The server's settings.
            stack: Closes the session.
            named: Further councils by name (`--council NAME=FILE`).
        """
        from collective.session import open_session

        session = await open_session(config, stack)
        return cls(session, {DEFAULT_COUNCIL: config, **(named or {})}, settings)

    def models(self) -> list[ModelEntry]:
        """Every model id: each council in each answer mode (`collective`, `collective-single`)."""
        entries = []
        order = [Mode.council, *(m for m in Mode if m is not Mode.council)]
        for council in self.configs:
            for mode in order:
                suffix = "" if mode is Mode.council else f"-{mode.value}"
                entries.append(ModelEntry(f"{council}{suffix}", council, mode))
        return entries

    def model(self, model_id: str) -> ModelEntry:
        """The entry of `model_id`.

        Raises:
            KeyError: No such model (its message lists the ids there are).
        """
        for entry in self.models():
            if entry.id == model_id:
                return entry
        known = ", ".join(e.id for e in self.models())
        raise KeyError(f"no model {model_id!r}; the models are: {known}")

    @property
    def running(self) -> int:
        """Runs whose task has not ended."""
        return len(self.runs)

    def start(self, ask: Ask) -> Run:
        """Start `ask` as a run (its events begin with `run`).

        Raises:
            Busy: As many runs go as the server allows.
            ThreadBusy: A run on the same thread is going.
            KeyError: An unknown model.
            ConfigError: A setting the council refuses (e.g. `k` out of range).
        """
        entry = self.model(ask.model)
        if self.running >= self.settings.max_concurrent:
            raise Busy(self.running, self.settings.retry_after_s)
        config = self._config(entry, ask)
        thread = (ask.thread or uuid.uuid4().hex) if entry.threaded else None
        if thread is not None and any(r.thread == thread for r in self.runs.values()):
            raise ThreadBusy(thread)  # two runs on one checkpointed thread would interleave
        run = Run(
            uuid.uuid4().hex[:16],
            thread,
            thread_key(thread) if thread is not None else None,
            entry,
            config.members,
            entry.threaded and config.planner is not None,
        )
        run.put(
            {
                "type": "run",
                "run_id": run.id,
                "thread": thread,
                "thread_id": run.thread_id,
                "model": entry.id,
                "mode": entry.mode.value,
                "members": run.members,
                "planned": run.planned,
            }
        )
        self.runs[run.id] = run
        run.task = asyncio.get_running_loop().create_task(self._run(run, ask, config))
        run.task.add_done_callback(lambda _: self.runs.pop(run.id, None))
        return run

    def _config(self, entry: ModelEntry, ask: Ask) -> CollectiveConfig:
        """The council's settings for this model and the request's `k` and `retrieval`."""
        key = (entry.council, entry.mode, ask.k, ask.retrieval)
        if key not in self._variants:
            from pydantic import ValidationError

            base = self.configs[entry.council]
            changes: dict[str, Any] = dict(GRAPH_MODES.get(entry.mode, {}))
            if ask.k is not None:
                changes["k"] = ask.k
            if ask.retrieval is not None:
                changes["retrieval"] = ask.retrieval
            if not changes:
                return base
            values = {name: getattr(base, name) for name in type(base).model_fields}
            try:
                self._variants[key] = type(base)(**{**values, **changes})
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}"
                    for e in exc.errors()
                )
                raise ConfigError(f"the council refuses these settings: {problems}") from None
        return self._variants[key]

    async def _run(self, run: Run, ask: Ask, config: CollectiveConfig) -> None:
        """The run's task: the council (or mode), its events into the queue, then the end."""
        try:
            if run.thread_id is None:
                result = await self._mode(ask.question, run.entry.mode, config)
            else:
                result = await self._council(run, ask, config)
            result["usage"] = usage_of(result)
            run.put({"type": "result", "result": result})
        except asyncio.CancelledError:
            run.put({"type": "error", "exception": Cancelled(run.id)})
            raise
        except Exception as exc:  # the caller turns it into the error it shows
            run.put({"type": "error", "exception": exc})

    async def _council(self, run: Run, ask: Ask, config: CollectiveConfig) -> dict[str, Any]:
        from collective.session import CouncilSession, Watch, run_council, start_run

        assert run.thread_id is not None
        session = CouncilSession(self.session.graph, self.session.store, config)
        await self._seed(session, run.thread_id, ask.earlier)
        start = await start_run(session, ask.question, run.thread_id, abandon=True)
        context = start.config.council_context()
        context.user_id = run.thread_id  # long-term memory never leaves the thread
        watch = Watch(
            on_event=run.put,
            on_finished=lambda node, error: run.put(
                {"type": "finished", "node": node, "error": error}
            ),
            on_note=lambda note: run.put({"type": "note", "text": note}),
        )
        return await run_council(
            session, ask.question, run.thread_id, watch=watch, context=context, start=start
        )

    async def _mode(self, question: str, mode: Mode, config: CollectiveConfig) -> dict[str, Any]:
        from collective.modes import run_mode
        from collective.session import mode_output

        result = await run_mode(question, mode, config.council_context())
        output = mode_output(result, mode.value)
        completion = result.output_tokens
        output["usage"] = {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": result.prompt_tokens + completion,
        }
        return output

    async def _seed(
        self, session: CouncilSession, thread_id: str, earlier: Sequence[tuple[str, str]]
    ) -> None:
        """A new thread's memory from the conversation the request carries (none: nothing)."""
        from collective import agents
        from collective.memory.conversation import remember_turn

        if not earlier:
            return
        config = {"configurable": {"thread_id": thread_id}}
        snapshot = await session.graph.aget_state(config)
        if snapshot.values:
            return  # the thread's own memory: the turns sent again are in it
        scope = session.config.council_context().memory(thread_id)
        scope = dataclasses.replace(scope, user_id=thread_id)  # as the run's (`_council`)
        data: dict[str, Any] | None = None
        for n, (question, answer) in enumerate(_exchanges(earlier)):
            memory = await asyncio.to_thread(
                remember_turn,
                data,
                session.store,
                run_id=f"earlier-{n}",
                question=question,
                answer=answer,
                scope=scope,
            )
            data = memory.to_dict()
        if data is not None:
            await session.graph.aupdate_state(config, {"memory": data}, as_node=agents.REMEMBER)

    async def history(self, thread: str) -> dict[str, Any]:
        """A thread's conversation as its memory holds it: the recent turns verbatim.

        Older turns are summarized into episodes as the memory fills (`collective.memory.tiers`);
        `summarized` counts those. An unknown thread has no turns.
        """
        config = {"configurable": {"thread_id": thread_key(thread)}}
        snapshot = await self.session.graph.aget_state(config)
        memory = (snapshot.values or {}).get("memory") or {}
        return {
            "thread": thread,
            "turns": [{"role": t["role"], "text": t["text"]} for t in memory.get("turns", [])],
            "summarized": len(memory.get("episodes", [])),
            "running": any(r.thread == thread for r in self.runs.values()),
        }

    def find(self, run_id: str) -> Run | None:
        """The running run of that id."""
        return self.runs.get(run_id)

    async def close(self) -> None:
        """Cancel every run and wait for their tasks to end."""
        tasks = [r.task for r in self.runs.values() if r.task is not None]
        for run in list(self.runs.values()):
            run.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Cancelled(CollectiveError):
    """The run was cancelled (its client went away, or asked)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id} was cancelled")


def thread_key(name: str) -> str:
    """The council's thread for a client's thread name: a digest, never the name itself."""
    return f"serve-{hashlib.sha256(name.encode()).hexdigest()[:24]}"


def _exchanges(turns: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """`(question, answer)` pairs of a conversation: a user turn and the assistant's after it.

    Consecutive user turns are one question; an assistant turn with no question before it is
    an answer to nothing (an empty question).
    """
    pairs: list[tuple[str, str]] = []
    asked: list[str] = []
    for role, text in turns:
        if role == "user":
            asked.append(text)
        elif role == "assistant":
            pairs.append(("\n".join(asked), text))
            asked = []
    return pairs


def config_files(councils: Mapping[str, Path]) -> dict[str, CollectiveConfig]:
    """Each named council's settings, read from its file (`--council NAME=FILE`)."""
    from collective.session import load_settings

    return {name: load_settings(path, {}).config for name, path in councils.items()}
