"""The budgeted model call: the one seam between a caller and a model, free of LangGraph.

Council nodes and `collective chat` call models only through `budgeted_call`: fit the role's
plan to the context and answer cap the backend reports (the KB allocation scaled by the
retrieval profile, the conversation by the agent's memory budget), assemble the prompt (in a
worker thread where counting waits on a server), send it, and on a server's `ContextOverflow`
refit once to the server's `n_ctx` less what was undercounted (the only refit loop in
collective). Every call is traced (a span carrying its budget report), reports progress to an
injected `on_event`, and is monitored against the agent's memory budget profile (threshold
events, one usage-log line).

`_Call.send` is the one place a model is called: `on_token` hears the answer as it streams, and
`admission` (`collective.models.admission`, default the process's) holds the prompt and output
tokens on the backend's server pool around it. A pool that ran out (`PoolExhausted`) is re-read
and the call sent once more; an answer the server cut short for lack of room is reported in the
result's warnings, the report's notes and the span.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, Required, TypedDict, Unpack

from collective.budget.assembly import AssembledPrompt, SectionContent, Sections, assemble
from collective.budget.counting import ChatMessage, TokenCounter
from collective.budget.plans import ModelBudget
from collective.budget.report import BudgetReport
from collective.errors import BackendUnavailable, ContextOverflow, PoolExhausted, ToolCallCut
from collective.memory.allowances import AgentBudget, resolve_budget
from collective.memory.usage import (
    BudgetEvent,
    UsageLog,
    record_model_call,
    scope_for_section,
)
from collective.models.admission import default_admission
from collective.models.base import Backend, ChatDelta, ChatOptions, ChatResult, collect
from collective.models.replicas import ReplicaFault
from collective.models.tool_calls import text_calls, tool_call_schema
from collective.telemetry import model_call_span, record_budget_report, record_replica_fault

if TYPE_CHECKING:
    from collective.graph.context import CouncilContext

__all__ = [
    "Admission",
    "ModelCall",
    "OnEvent",
    "OnToken",
    "Request",
    "budgeted_call",
    "cut_answer_warning",
    "fit_plan",
    "reused_tokens",
]

log = logging.getLogger(__name__)

OnEvent = Callable[[dict[str, Any]], None]
"""Receives the call's progress events (`budget`, `budget_event`)."""

OnToken = Callable[[str], Awaitable[None] | None]
"""Receives answer text as it is generated, piece by piece; may be a coroutine function."""


class Admission(Protocol):
    """Per-server admission control: hold `tokens` of the backend's server while a call runs."""

    def reserve(
        self,
        backend: Backend,
        tokens: int,
        *,
        label: str = "",
        on_wait: Callable[[str], None] | None = None,
    ) -> AbstractAsyncContextManager[Any]:
        """Wait until the server can take `tokens` more, hold them, release on exit.

        `label` names the caller in logs; `on_wait` hears why the call waits, if it does.
        """
        ...

    def exhausted(self, pool: Any) -> None:
        """The server of `pool` ran out of KV pool: hold calls to it to a shared pool."""
        ...

    def place(
        self,
        backends: Sequence[Backend],
        tokens: int,
        *,
        label: str = "",
        on_wait: Callable[[str], None] | None = None,
        on_left_out: Callable[[Backend, Exception], None] | None = None,
    ) -> AbstractAsyncContextManager[tuple[Backend, Any]]:
        """As `reserve`, on whichever of `backends` (replicas) has room; yields it first.

        `on_left_out` hears each replica left out because its pool could not be read.
        """
        ...

    def in_flight(self, server: str) -> int:
        """Tokens held on `server` now."""
        ...


class Request(TypedDict, total=False):
    """What one call asks of the model, beside who calls which backend (`budgeted_call`)."""

    contents: Required[Sequence[SectionContent]]
    """Content per budget section."""
    compose: Required[Callable[[Sections], list[ChatMessage]]]
    """Turns the fitted section texts into messages."""
    question: Required[str]
    """The task (its complexity sets the agent's memory budget)."""
    retrieval_profile: str
    """The applied retrieval profile (default `balanced`), for the call's trace."""
    kb_factor: float
    """How much the KB allocation is scaled (default 1.0): the applied retrieval profile's."""
    json_schema: dict[str, Any] | None
    """Constrain the answer to this schema where the backend can."""
    tools: Sequence[dict[str, Any]] | None
    """Tool schemas offered (OpenAI shape), already accounted for in the `tools` section."""
    tool_choice: str | None
    """`required`: the answer is one call to `tools`, held to their schemas by structured output
    where the backend has it (else the server's own `tool_choice`)."""
    output_cap: int | None
    """The largest answer this call needs (below the plan's output budget)."""
    samples: int
    """Completions of the one prompt (default 1): same-prompt samples, each sampled apart. One
    request where the backend serves several (`Backend.most_samples`: llama-server's `n_cmpl`),
    else one request each, sent at once (the in-process engine reads their prompt once); the
    result is the first, `ChatResult.samples` the others."""


@dataclass(frozen=True)
class ModelCall:
    """What came back from one budgeted call."""

    result: ChatResult
    report: BudgetReport
    prompt: AssembledPrompt
    overflow: ContextOverflow | None = None
    """The server's overflow that caused the one refit, if there was one."""

    @functools.cached_property
    def report_dict(self) -> dict[str, Any]:
        """`report.to_dict()`, made once, for state and output."""
        return self.report.to_dict()


def fit_plan(
    settings: CouncilContext,
    role: str,
    backend: Backend,
    n_ctx: int,
    kb_factor: float = 1.0,
    output_cap: int | None = None,
    memory: AgentBudget | None = None,
    keep_tools: bool = False,
) -> tuple[ModelBudget, list[str]]:
    """The role's budget plan fitted to `n_ctx`, capped and with its KB allocation scaled.

    The answer cap is the smallest of the role's configured cap, the backend's own
    (`Backend.output_cap`) and the call's `output_cap`. With the agent's `memory` budget, the
    sections of its conversation memory (L1/L0 summary and L2 recall, the `agent_recent` scope)
    get at most that scope's share of it. A larger KB allocation draws on the `tools` section
    only when the call has no tool content (`keep_tools`): tool results must not be cut to
    nothing to make room for chunks.

    Raises:
        ConfigError: The role's plan lacks a section the role needs.
    """
    plan = settings.budget_plan(role).fit_to_context(n_ctx, f"{backend.spec} reports n_ctx={n_ctx}")
    caps = [settings.output_caps.get(role), backend.output_cap, output_cap]
    cap = min((c for c in caps if c), default=plan.output_budget)
    if cap < plan.output_budget:
        plan = plan.with_output(cap)
    notes = []
    if kb_factor != 1.0 and "kb_chunks" in plan.sections:
        before = plan.sections["kb_chunks"]
        plan = plan.resize("kb_chunks", kb_factor, donors=() if keep_tools else ("tools",))
        notes.append(
            f"kb_chunks {before} -> {plan.sections['kb_chunks']} (retrieval profile x{kb_factor:g})"
        )
    if memory is not None:
        share = memory.scope_budgets.get("agent_recent", 0)
        for name, allocated in plan.sections.items():
            if scope_for_section(name) == "agent_recent" and allocated > share:
                plan = plan.resize(name, share / allocated)
                notes.append(
                    f"{name} {allocated} -> {plan.sections[name]} (memory budget: "
                    f"{memory.profile.name} @ {memory.complexity}, agent_recent share {share})"
                )
    return plan, notes


async def budgeted_call(
    settings: CouncilContext,
    *,
    role: str,
    agent: str,
    backend: Backend,
    on_event: OnEvent | None = None,
    on_token: OnToken | None = None,
    admission: Admission | None = None,
    **request: Unpack[Request],
) -> ModelCall:
    """Assemble the request's `contents` under the role's budget and call `backend`.

    Args:
        settings: The run's settings (`CouncilContext`: its plans, caps, temperature, usage log
            and memory budget profiles, read when it was made).
        role: `planner`, `specialist`, `reviewer`, `judge` or `chat` (selects the budget plan
            and answer cap).
        agent: Who calls (`plan`, `specialist-2`, `chat`, ...): the budget report's node, the
            memory budget profile's agent and the usage log's name.
        backend: The model to call.
        on_event: Receives progress events; None drops them.
        on_token: Receives answer text as it is generated, where the backend streams.
        admission: Reserves the call's tokens on the backend's server; None: the process's.
        **request: The sections, how to compose them, the question and options (`Request`).

    Raises:
        ContextOverflow: The refitted prompt overflowed too.
        BudgetError: The plan cannot be fitted to the context.
        BackendError: Any other backend failure, unchanged.
    """
    emit = on_event or (lambda event: None)
    memory_profile = settings.memory_profiles.profile_for(agent)
    memory = resolve_budget(
        memory_profile, request["question"], signals_file=settings.complexity_signals
    )
    retrieval_profile = request.get("retrieval_profile", "balanced")
    with model_call_span(
        agent, backend.model, retrieval_profile=retrieval_profile, role=role, backend=backend.spec
    ) as span:
        admission = admission or default_admission()
        seam = _Call(settings, role, agent, backend, request, memory, emit, on_token, admission)
        try:
            call = await seam.fit_and_send()
        finally:  # the replicas that failed this call, on its span, whether it failed or not
            for fault in seam.faults:
                record_replica_fault(span, fault.to_dict())
        usage = call.result.usage
        span.set_attribute("usage.prompt_tokens", usage.prompt_tokens)
        span.set_attribute("usage.completion_tokens", usage.completion_tokens)
        if "ttft_ms" in call.result.timings:  # time to first token
            span.set_attribute("ttft_ms", call.result.timings["ttft_ms"])
        for warning in call.result.warnings:
            span.add_event("backend.warning", {"message": warning})

        def on_threshold(event: BudgetEvent) -> None:
            span.add_event("budget.threshold", {"level": event.level, "message": event.message})
            emit(
                {
                    "type": "budget_event",
                    "node": agent,
                    "level": event.level,
                    "message": event.message,
                }
            )

        log = UsageLog(settings.usage_log) if settings.usage_log else None
        monitor = functools.partial(record_model_call, log, agent, memory, call.report)
        # Appending to the log is file I/O: keep it off the event loop.
        record = await asyncio.to_thread(monitor, on_threshold) if log else monitor(on_threshold)
        tier: str = record.final_complexity
        if record.final_complexity != record.complexity:  # a bump
            tier = f"{record.complexity} -> {record.final_complexity}"
        report = replace(call.report, memory_profile=record.profile, memory_tier=tier)
        call = replace(call, report=report)
        record_budget_report(span, call.report_dict)
        return call


@dataclass(frozen=True)
class _Call:
    """One budgeted call in progress: who calls which backend with what."""

    settings: CouncilContext
    role: str
    agent: str
    backend: Backend
    request: Request
    memory: AgentBudget
    emit: OnEvent
    on_token: OnToken | None
    admission: Admission
    faults: list[ReplicaFault] = field(default_factory=list)
    """Replicas this call found down or lost (`collective.models.replicas.ReplicaFault`)."""

    def _fault(self, replica: Backend, failed: str, instead: str = "") -> None:
        """Note a replica that failed this call: logged, told to the stream, kept for the report.

        A replica is noted once per call (the first thing that failed on it).
        """
        if not instead and any(f.server == replica.spec for f in self.faults):
            return
        fault = ReplicaFault(replica.spec, failed, instead)
        self.faults.append(fault)
        log.warning("%s: %s", self.agent, fault.describe())
        if instead:  # known now (mid-answer): tell the stream at once
            self.emit({"type": "fault", "node": self.agent, **fault.to_dict()})

    async def fit_and_send(self) -> ModelCall:
        """Fit, assemble, send; refit once on the server's overflow.

        With replicas (`Backend.replicas`), the call is planned for the replica with the most
        room and placed on one with room; a replica that fails before the call's first token
        is left out (noted in the report) and the call starts over on the others.
        """
        replicas = self.backend.replicas()
        while True:
            try:
                call = await self._fit_and_send_on(await self._pick(replicas), replicas)
            except _ReplicaDown as down:
                replicas = [r for r in replicas if r is not down.replica]
                if not replicas:
                    raise down.error from None
                self._fault(down.replica, f"failed before the first token ({_why(down.error)})")
                continue
            # What was done instead is known now: the call ran on another replica.
            used = call.report.server or ""
            done = [f.ran_on(used) for f in self.faults]
            for before, fault in zip(self.faults, done, strict=True):
                if not before.instead:  # not yet told to the stream
                    self.emit({"type": "fault", "node": self.agent, **fault.to_dict()})
            self.faults[:] = done
            call.report.notes.extend(f.describe() for f in done)
            report = replace(call.report, faults=[f.to_dict() for f in done])
            return replace(call, report=report)

    async def _pick(self, replicas: list[Backend]) -> Backend:
        """The replica to plan for: the one with the most free KV room now."""
        if len(replicas) == 1:
            return replicas[0]
        pools = await asyncio.gather(*(r.pool() for r in replicas), return_exceptions=True)
        answered = zip(replicas, pools, strict=True)
        live = [(r, p) for r, p in answered if not isinstance(p, BaseException)]
        if not live:  # none answers: the first one's error stands
            error = pools[0]
            raise error if isinstance(error, BaseException) else AssertionError(error)
        for replica, pool in zip(replicas, pools, strict=True):
            if isinstance(pool, BaseException):
                self._fault(replica, f"left out: its KV pool could not be read ({_why(pool)})")

        def room(item: tuple[Backend, Any]) -> float:
            pool = item[1]
            return math.inf if pool is None else pool.tokens - self.admission.in_flight(pool.server)

        return max(live, key=room)[0]

    async def _fit_and_send_on(self, backend: Backend, replicas: list[Backend]) -> ModelCall:
        """The call planned for `backend`'s window, sent to a replica it fits."""
        request = self.request
        contents = request["contents"]
        kb_factor = request.get("kb_factor", 1.0)
        keep_tools = any(c.name == "tools" for c in contents)
        try:
            n_ctx = await backend.context_window()
            counter = await backend.token_counter()
        except BackendUnavailable as error:
            if len(replicas) == 1:
                raise
            raise _ReplicaDown(backend, error) from error
        overflow: ContextOverflow | None = None
        exhausted: PoolExhausted | None = None
        while True:
            plan, notes = fit_plan(
                self.settings,
                self.role,
                backend,
                n_ctx,
                kb_factor,
                request.get("output_cap"),
                self.memory,
                keep_tools,
            )
            assembly = functools.partial(
                assemble,
                plan,
                counter,
                contents,
                request["compose"],
                node=self.agent,
                model=backend.model,
                notes=notes,
                tools=request.get("tools"),  # counted as the server's template renders them
            )
            # A counter that asks a server waits on I/O: off the event loop. A local tokenizer
            # counts in microseconds per chunk (memoised), cheaper than a thread hop.
            prompt = await asyncio.to_thread(assembly) if counter.blocking else assembly()
            self.emit({"type": "budget", "node": self.agent, "report": prompt.report.to_dict()})
            try:
                candidates, down = await _fitting(replicas, backend, plan.n_ctx)
                for replica, problem in down:
                    self._fault(
                        replica, f"left out: its window could not be read ({_why(problem)})"
                    )
                result, used = await self.send(prompt, plan.output_budget, candidates)
            except _PoolOut as out:
                if exhausted is not None:
                    raise out.error from None
                # Every request on that pool failed: re-read the server the call ran on (with
                # replicas, not always the one it was planned for), and let admission (now
                # treating that pool as shared) wait for room before sending once more.
                exhausted = out.error
                self.admission.exhausted(await out.replica.pool())
                n_ctx = await backend.context_window()
                continue
            except ContextOverflow as error:
                if overflow is not None:
                    raise
                # The server knows better: refit to its n_ctx, less what we undercounted, once.
                overflow = error
                undercount = max(0, error.n_prompt_tokens - prompt.report.prompt_tokens)
                n_ctx = min(n_ctx, error.n_ctx) - undercount
                continue
            return await self._finish(result, used, plan, prompt, counter, overflow)

    async def _finish(
        self,
        result: ChatResult,
        used: Backend,
        plan: ModelBudget,
        prompt: AssembledPrompt,
        counter: TokenCounter,
        overflow: ContextOverflow | None,
    ) -> ModelCall:
        """The call's outcome: a cut answer flagged, the report told how the answer ended."""
        cut = cut_answer_warning(
            result, max_tokens=plan.output_budget, n_ctx=plan.n_ctx, server=used.spec
        )
        if cut is not None:
            log.warning("%s: %s", self.agent, cut)
            result.warnings.append(cut)
            prompt.report.notes.append(cut)
        # How the answer ended (`length`: cut; the CLI flags it), where, and how much of the
        # prompt was shared and reused by the server travel with its report.
        report = replace(
            prompt.report,
            finish_reason=result.finish_reason,
            output_tokens=sum(r.usage.completion_tokens for r in (result, *result.samples)),
            completions=1 + len(result.samples),
            shared_tokens=await _shared_tokens(prompt, counter),
            reused_tokens=reused_tokens(result),
            server=used.spec,
        )
        return ModelCall(result, report, prompt, overflow)

    async def send(
        self, prompt: AssembledPrompt, max_tokens: int, candidates: list[Backend]
    ) -> tuple[ChatResult, Backend]:
        """The one place a model is called: admission around it, streaming through it.

        Returns the result and the backend (replica) that answered.

        Raises:
            ToolCallCut: A tool call was cut at the output cap, or the cap cannot hold one:
                the error names the role's setting that raises it.
        """
        try:
            return await self._send(prompt, max_tokens, candidates)
        except ToolCallCut as cut:
            raise cut.naming(f"output_caps.{self.role}") from None

    async def _send(
        self, prompt: AssembledPrompt, max_tokens: int, candidates: list[Backend]
    ) -> tuple[ChatResult, Backend]:
        """`send` without naming the setting of a cut tool call's cap."""

        def on_wait(message: str) -> None:
            self.emit(
                {"type": "progress", "node": self.agent, "status": "waiting", "message": message}
            )

        tools, choice = self.request.get("tools"), self.request.get("tool_choice")
        json_schema = self.request.get("json_schema")
        # A required call is held to the tools' schema wherever the backend does not force it
        # itself but has structured output: a server's own forcing depends on the template
        # (llama-server let Qwen2.5-Coder write free text under `required`).
        can_hold = self.backend.supports_json_schema and not self.backend.forces_tool_calls
        forced = tools if choice == "required" and can_hold else None
        if forced:
            json_schema = tool_call_schema(forced, max_tokens)
        samples = self.request.get("samples", 1)
        tokens = (prompt.report.prompt_tokens + max_tokens) * samples  # a slot each
        streamed: list[ChatDelta] = []
        text_only = _text_only(self.on_token) if self.on_token and not forced else None
        replicas = len(self.backend.replicas()) > 1

        def on_delta(delta: ChatDelta) -> Awaitable[None] | None:
            streamed.append(delta)  # a replica that fails after this is not skipped
            return text_only(delta) if text_only is not None else None

        async with self._hold(candidates, tokens, on_wait) as backend:
            started = time.perf_counter()
            options = ChatOptions(
                max_tokens=max_tokens,
                temperature=self.settings.temperature,
                json_schema=json_schema,
                tools=tools,
                tool_choice=choice,
            )
            one_request = samples > 1 and samples <= await backend.most_samples()
            if one_request:
                options["n"] = samples
            first = backend.stream(prompt.messages, **options)
            # Samples sent one by one differ by seed; the first keeps the backend's own.
            others = [] if one_request else [
                collect(backend.stream(prompt.messages, **_seeded(options, i)))
                for i in range(1, samples)
            ]  # fmt: skip
            try:
                result, *rest = await _together(
                    collect(first, on_delta if replicas else text_only), *others
                )
            except PoolExhausted as error:
                raise _PoolOut(backend, error) from error
            except BackendUnavailable as error:
                if streamed and replicas:  # lost mid-answer: this call fails, its node retries
                    self._fault(
                        backend,
                        f"failed mid-answer, after {len(streamed)} pieces of it ({_why(error)})",
                        "the call failed; a council node retries it once on a live replica",
                    )
                if streamed or not replicas:
                    raise
                raise _ReplicaDown(backend, error) from error  # before the first token
        if rest:
            result = replace(result, samples=rest)
        if tools and choice != "none":  # a call written as text (Qwen's braces) still counts
            result = text_calls(
                result,
                tools,
                required=choice == "required",
                held=bool(forced),
                cap=max_tokens,
            )
        result.timings.setdefault("wall_ms", (time.perf_counter() - started) * 1000)
        return result, backend

    @asynccontextmanager
    async def _hold(
        self, candidates: list[Backend], tokens: int, on_wait: Callable[[str], None]
    ) -> AsyncIterator[Backend]:
        """Admission for the call: its backend's pool, or a place on one of its replicas."""
        if len(candidates) == 1:
            async with self.admission.reserve(
                candidates[0], tokens, label=self.agent, on_wait=on_wait
            ):
                yield candidates[0]
        else:

            def left_out(replica: Backend, error: Exception) -> None:
                self._fault(replica, f"left out: its KV pool could not be read ({_why(error)})")

            async with self.admission.place(
                candidates, tokens, label=self.agent, on_wait=on_wait, on_left_out=left_out
            ) as (backend, _):
                yield backend


class _ReplicaDown(Exception):
    """A replica failed before the call's first token: the call goes to another one."""

    def __init__(self, replica: Backend, error: BaseException) -> None:
        super().__init__(str(error))
        self.replica = replica
        self.error = error


class _PoolOut(Exception):
    """The server `replica` ran out of KV pool (`PoolExhausted`) while the call ran on it."""

    def __init__(self, replica: Backend, error: PoolExhausted) -> None:
        super().__init__(str(error))
        self.replica = replica
        self.error = error


async def _fitting(
    replicas: list[Backend], planned: Backend, n_ctx: int
) -> tuple[list[Backend], list[tuple[Backend, BaseException]]]:
    """The replicas a prompt planned for `n_ctx` on `planned` fits, and those that are down.

    The fitting ones come planned one first; the down ones (their window could not be read)
    with the error.
    """
    if len(replicas) == 1:
        return replicas, []
    others = [r for r in replicas if r is not planned]
    windows = await asyncio.gather(*(r.context_window() for r in others), return_exceptions=True)
    read = list(zip(others, windows, strict=True))
    fits = [r for r, w in read if isinstance(w, int) and w >= n_ctx]
    return [planned, *fits], [(r, w) for r, w in read if isinstance(w, BaseException)]


async def _together(*calls: Awaitable[ChatResult]) -> list[ChatResult]:
    """Every call's result, in order; one that fails stops the others (their streams close)."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()  # nothing to those done


def _seeded(options: ChatOptions, seed: int) -> ChatOptions:
    seeded = options.copy()
    seeded["seed"] = seed
    return seeded


def _why(error: BaseException) -> str:
    """`Type: message` of a replica's failure, on one line."""
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


async def _shared_tokens(prompt: AssembledPrompt, counter: TokenCounter) -> int | None:
    """Prompt tokens outside the caller's own parts (None: the prompt has none).

    The own parts (`AssembledPrompt.own`) are counted as text; the template's tokens after them
    (the end of the turn, the answer's opening) are the same for every member and count as shared.
    """
    own = "\n\n".join(prompt.own())
    if not own:
        return None
    n = await asyncio.to_thread(counter.count, own) if counter.blocking else counter.count(own)
    return max(0, prompt.report.prompt_tokens - n)


def reused_tokens(result: ChatResult) -> int | None:
    """Prompt tokens the server reused rather than computed, where it says (`cache_n`)."""
    if result.usage.cached_tokens is not None:
        return result.usage.cached_tokens
    cache_n = result.timings.get("cache_n")
    return int(cache_n) if cache_n is not None else None


def cut_answer_warning(
    result: ChatResult, *, max_tokens: int, n_ctx: int, server: str
) -> str | None:
    """A loud warning when an answer was cut short by the context, not by its own budget.

    `finish_reason == "length"` with fewer tokens than were reserved means the server ran out
    of room for the answer: its slot is smaller than the plan assumed (a restarted server) or
    the prompt was longer than counted. A response that reports a smaller `n_ctx` says so too.
    """
    done = result.usage.completion_tokens
    reported = result.timings.get("n_ctx")
    if reported is not None and 0 < reported < n_ctx:
        return (
            f"CUT ANSWER RISK on {server}: the server reports n_ctx {int(reported)}, the call "
            f"was planned for {n_ctx}; re-read the server before the next call"
        )
    if result.finish_reason == "length" and done < max_tokens:
        return (
            f"CUT ANSWER on {server}: generation stopped after {done} of {max_tokens} reserved "
            f"tokens (finish_reason length) with a prompt of {result.usage.prompt_tokens}; the "
            f"server has less room than the n_ctx {n_ctx} planned for (restarted with smaller "
            "slots?)"
        )
    return None


def _text_only(on_token: OnToken) -> Callable[[ChatDelta], Awaitable[None] | None]:
    """`collect`'s `on_delta` that passes answer text (not reasoning) to `on_token`."""

    def on_delta(delta: ChatDelta) -> Awaitable[None] | None:
        return on_token(delta.text) if delta.text else None

    return on_delta
