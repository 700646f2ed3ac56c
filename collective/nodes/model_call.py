"""One budgeted model call, the primitive every council node uses.

Fits the role's budget preset to the context the backend really reports, assembles the prompt
section by section (in a worker thread: counting is CPU work and may be HTTP for llama-server),
sends it, and on a server's `ContextOverflow` refits to the server's own `n_ctx` and retries
once. Every call is traced (an OpenTelemetry span carrying its budget report), emits its budget
report as a custom stream event, and is monitored against the agent's memory budget profile
(threshold events, one usage-log line).
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.config import get_stream_writer

from collective.budget.assembly import AssembledPrompt, SectionContent, assemble
from collective.budget.counting import ChatMessage
from collective.budget.monitor import BudgetEvent, UsageLog, record_model_call
from collective.budget.plans import PRESETS, ModelBudget
from collective.budget.profiles import AgentBudget, ProfileAssignments, resolve_budget
from collective.budget.report import BudgetReport
from collective.errors import ConfigError, ContextOverflow
from collective.graph.context import EMBEDDED_OUTPUT_CAP, CouncilContext
from collective.kb.retrieval import kb_allocation_factor
from collective.models.base import Backend, ChatResult
from collective.models.embedded import EMBEDDED_MODEL_NAME
from collective.telemetry import model_call_span, record_budget_report

__all__ = ["ModelCall", "call_model", "emit", "plan_for", "resolve_backend"]


def resolve_backend(ref: str | Backend) -> Backend:
    """A backend from a config spec string (shared per process) or as given."""
    if isinstance(ref, Backend):
        return ref
    from collective.models.registry import backend_from_spec

    return backend_from_spec(ref)


def emit(event: dict[str, Any]) -> None:
    """Send a custom stream event (progress, budget reports); a no-op outside a graph run."""
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return
    writer(event)


@dataclass(frozen=True)
class ModelCall:
    """What came back from one budgeted call."""

    result: ChatResult
    report: BudgetReport
    prompt: AssembledPrompt
    report_dict: dict[str, Any]
    """`report.to_dict()`, made once: it goes to the stream, the span and the state."""


def plan_for(
    ctx: CouncilContext,
    role: str,
    backend: Backend,
    n_ctx: int,
    kb_factor: float = 1.0,
    output_cap: int | None = None,
) -> tuple[ModelBudget, list[str]]:
    """The role's budget plan fitted to `n_ctx`, capped and with its KB allocation adjusted."""
    ref = ctx.budgets.get(role, role)
    base = ref if isinstance(ref, ModelBudget) else PRESETS.get(ref)
    if base is None:
        raise ConfigError(f"unknown budget preset {ref!r} for {role}; use one of {list(PRESETS)}")
    plan = base.fit_to_context(n_ctx, f"{backend.spec} reports n_ctx={n_ctx}")
    small = backend.model == EMBEDDED_MODEL_NAME
    caps = [ctx.output_caps.get(role), EMBEDDED_OUTPUT_CAP if small else None, output_cap]
    cap = min((c for c in caps if c), default=plan.output_budget)
    if cap < plan.output_budget:
        plan = plan.with_output(cap)
    notes = []
    if kb_factor != 1.0 and "kb_chunks" in plan.sections:
        before = plan.sections["kb_chunks"]
        plan = plan.resize("kb_chunks", kb_factor)
        notes.append(
            f"kb_chunks {before} -> {plan.sections['kb_chunks']} (retrieval profile x{kb_factor:g})"
        )
    return plan, notes


async def call_model(
    ctx: CouncilContext,
    *,
    role: str,
    node: str,
    backend: Backend,
    contents: Sequence[SectionContent],
    compose: Callable[[Mapping[str, str]], list[ChatMessage]],
    question: str,
    retrieval_profile: str = "balanced",
    json_schema: dict[str, Any] | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    output_cap: int | None = None,
) -> ModelCall:
    """Assemble `contents` under the role's budget and call `backend`.

    Args:
        ctx: The run's settings.
        role: `planner`, `specialist` or `judge` (selects the budget preset and answer cap).
        node: The node name for the budget report (`specialist-2`, ...); also the agent name
            for memory budget profiles and the usage log.
        backend: The model to call.
        contents: Content per budget section.
        compose: Turns fitted section texts into messages.
        question: The council's question (its complexity sets the agent's memory budget).
        retrieval_profile: The applied retrieval profile: it scales the KB allocation.
        json_schema: Constrain the answer to this schema where the backend can.
        tools: Tool schemas offered to the model (OpenAI shape); they must already be
            accounted for in `contents` (the `tools` section).
        output_cap: The largest answer this call needs (below the plan's output budget).
    """
    with model_call_span(node, backend.model, budget_profile=retrieval_profile, role=role) as span:
        kb_factor = kb_allocation_factor(retrieval_profile)
        call = await _call(
            ctx, role, node, backend, contents, compose, kb_factor, json_schema, tools, output_cap
        )
        record_budget_report(span, call.report_dict)
        usage = call.result.usage
        span.set_attribute("usage.prompt_tokens", usage.prompt_tokens)
        span.set_attribute("usage.completion_tokens", usage.completion_tokens)
        for warning in call.result.warnings:
            span.add_event("backend.warning", {"message": warning})
        if ctx.usage_log:  # appending to the log is file I/O: keep it off the event loop
            await asyncio.to_thread(_monitor, ctx, node, question, call.report, span)
        else:
            _monitor(ctx, node, question, call.report, span)
        return call


def _monitor(ctx: CouncilContext, agent: str, question: str, report: BudgetReport, span) -> None:
    """Check the call against the agent's memory budget profile and log its usage."""

    def on_event(event: BudgetEvent) -> None:
        span.add_event("budget.threshold", {"level": event.level, "message": event.message})
        emit(
            {"type": "budget_event", "node": agent, "level": event.level, "message": event.message}
        )

    budget = _agent_budget(tuple(sorted(ctx.agent_profiles.items())), agent, question)
    log = UsageLog(ctx.usage_log) if ctx.usage_log else None
    record_model_call(log, agent, budget, report, on_event=on_event)


@functools.lru_cache(maxsize=256)
def _agent_budget(
    assignments: tuple[tuple[str, str], ...], agent: str, question: str
) -> AgentBudget:
    """The agent's memory budget for this question (profiles and complexity parsed once)."""
    profile = ProfileAssignments.from_config(dict(assignments)).profile_for(agent)
    return resolve_budget(profile, question)


async def _call(
    ctx: CouncilContext,
    role: str,
    node: str,
    backend: Backend,
    contents: Sequence[SectionContent],
    compose: Callable[[Mapping[str, str]], list[ChatMessage]],
    kb_factor: float,
    json_schema: dict[str, Any] | None,
    tools: Sequence[dict[str, Any]] | None,
    output_cap: int | None,
) -> ModelCall:
    n_ctx = await backend.context_window()
    counter = await backend.token_counter()
    # Tool schemas travel beside the messages; their JSON is what the template renders.
    # (Counting may be an HTTP call to the server: never on the event loop.)
    beside = await asyncio.to_thread(counter.count, json.dumps(list(tools))) if tools else 0
    for attempt in (1, 2):
        plan, notes = plan_for(ctx, role, backend, n_ctx, kb_factor, output_cap)
        prompt = await asyncio.to_thread(
            assemble,
            plan,
            counter,
            contents,
            compose,
            node=node,
            model=backend.model,
            notes=notes,
            beside_messages=beside,
        )
        report = prompt.report.to_dict()
        emit({"type": "budget", "node": node, "report": report})
        started = time.perf_counter()
        try:
            result = await backend.chat(
                prompt.messages,
                max_tokens=plan.output_budget,
                temperature=ctx.temperature,
                json_schema=json_schema,
                tools=tools,
            )
        except ContextOverflow as overflow:
            if attempt == 2:
                raise
            # The server knows better: refit to its n_ctx, less whatever we undercounted, once.
            undercount = max(0, overflow.n_prompt_tokens - prompt.report.prompt_tokens)
            n_ctx = min(n_ctx, overflow.n_ctx) - undercount
            continue
        result.timings.setdefault("wall_ms", (time.perf_counter() - started) * 1000)
        return ModelCall(result, prompt.report, prompt, report)
    raise AssertionError("unreachable")
