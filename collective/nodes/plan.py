"""plan: a short deliberation strategy from the planner model (small budget)."""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime

from collective.budget.assembly import chunks_section, text_section
from collective.graph.context import CouncilContext
from collective.graph.state import CouncilState
from collective.nodes.chunks import scored_chunks
from collective.nodes.model_call import call_model, emit, resolve_backend
from collective.prompts import planner as prompt

__all__ = ["plan"]


async def plan(state: CouncilState, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """Ask the planner how the council should deliberate."""
    ctx = runtime.context
    backend = resolve_backend(ctx.planner)
    emit({"type": "progress", "node": "plan", "status": "running", "model": backend.model})
    started = time.perf_counter()
    call = await call_model(
        ctx,
        role="planner",
        node="plan",
        backend=backend,
        contents=[
            text_section("system", prompt.SYSTEM.format(k=ctx.k)),
            text_section("conversation_summary", state.get("conversation", ""), keep="end"),
            text_section("task", state["question"]),
            chunks_section("kb_chunks", scored_chunks(state.get("chunks", []), ctx.hidden_tags)),
        ],
        compose=prompt.compose,
        question=state["question"],
        retrieval_profile=state.get("retrieval", {}).get("applied", "balanced"),
    )
    elapsed = (time.perf_counter() - started) * 1000
    emit(
        {
            "type": "progress",
            "node": "plan",
            "status": "done",
            "ms": elapsed,
            "tokens_in": call.report.prompt_tokens,
            "tokens_out": call.result.usage.completion_tokens,
        }
    )
    return {
        "plan": call.result.text.strip(),
        "budgets": [call.report_dict],
        "timings": {"plan_ms": elapsed},
    }
