"""plan: a short deliberation strategy from the planner model (small budget)."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from collective import agents
from collective.budget.assembly import chunks_section, text_section
from collective.graph.context import CouncilContext
from collective.graph.state import CouncilState, applied_profile
from collective.models.refs import resolve_backend
from collective.nodes.chunks import chunks_from_state, scored_chunks
from collective.nodes.model_call import NodeProgress, call_model
from collective.prompts import council
from collective.prompts import planner as prompt

__all__ = ["plan"]


async def plan(state: CouncilState, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """Ask the planner how the council should deliberate (no planner: no plan, no call)."""
    ctx = runtime.context
    if ctx.planner is None:
        return {}  # nothing planned: no row in the live view, the members read no plan
    backend = resolve_backend(ctx.planner)
    progress = NodeProgress(agents.PLAN, backend.model)
    call = await call_model(
        ctx,
        node=agents.PLAN,
        backend=backend,
        contents=[
            text_section("system", prompt.SYSTEM.format(k=ctx.k)),
            text_section("conversation_summary", state.get("conversation", ""), keep="end"),
            council.task_section(prompt.task_text(state["question"])),
            chunks_section(
                "kb_chunks",
                scored_chunks(chunks_from_state(state.get("chunks", [])), ctx.hidden_tags),
            ),
        ],
        compose=prompt.compose,
        output_cap=prompt.MAX_TOKENS,
        question=state["question"],
        retrieval_profile=applied_profile(state),
    )
    timings = progress.done(call)
    # The members follow at once: their servers may make this prompt's prefix reusable by
    # more slots than the one that holds it.
    members = {b.spec: b for b in map(resolve_backend, ctx.specialists)}
    await asyncio.gather(*(b.before_fan_out() for b in members.values()))
    return {
        "plan": call.result.text.strip(),
        "budgets": [call.report_dict],
        "timings": timings,
    }
