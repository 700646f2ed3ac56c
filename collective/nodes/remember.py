"""remember: update the memory tiers with this run and close its timings."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from langgraph.runtime import Runtime

from collective.graph.context import CouncilContext
from collective.graph.state import CouncilState
from collective.memory.conversation import memory_counter, remember_turn
from collective.memory.summarize import ExtractiveSummarizer, backend_summarizer
from collective.models.refs import resolve_backend

__all__ = ["remember"]


async def remember(state: CouncilState, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """Record the question and verdict in L0 (compressing to L1/L2 as the tiers fill)."""
    ctx, info = runtime.context, runtime.execution_info
    summarizer = None
    if ctx.summarizer is not None:
        fallback = ExtractiveSummarizer(memory_counter())
        backend = resolve_backend(ctx.summarizer)
        summarizer = backend_summarizer(backend, asyncio.get_running_loop(), fallback)
    memory = await asyncio.to_thread(  # compression may archive to the (SQLite) store
        remember_turn,
        state.get("memory"),
        runtime.store,
        run_id=info.run_id if info and info.run_id else uuid.uuid4().hex,
        question=state["question"],
        answer=state.get("answer", ""),
        summarizer=summarizer,
        scope=ctx.memory(info.thread_id if info else None),
    )
    total = (time.time() - state["started_at"]) * 1000 if state.get("started_at") else 0.0
    return {"memory": memory.to_dict(), "timings": {"total_ms": total}}
