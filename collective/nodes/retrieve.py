"""retrieve: KB candidates for the question under a budget-aware retrieval profile."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from collective import agents
from collective.budget.counting import FIRST_REACH
from collective.budget.plans import PRESETS
from collective.graph.context import CouncilContext, open_knowledge
from collective.graph.state import CouncilState
from collective.kb.retrieval import RetrievalResult, Rewriter, backend_rewriter
from collective.kb.retrieval import retrieve as run_retrieval
from collective.kb.store import Chunk
from collective.memory.conversation import conversation_summary, long_term_recall
from collective.models.refs import resolve_backend
from collective.nodes.chunks import chunks_to_state
from collective.nodes.model_call import NodeProgress, emit
from collective.question import check_question

__all__ = ["retrieve"]


def _find(
    ctx: CouncilContext,
    state: CouncilState,
    question: str,
    rewriter: Rewriter | None,
    recall: Callable[[], str] = str,
) -> tuple[str, RetrievalResult]:
    conversation = conversation_summary(state.get("memory"), recall())
    result = run_retrieval(
        open_knowledge(ctx),
        question,
        ctx.retrieval,
        max_inject=ctx.max_inject,
        max_latency_ms=ctx.max_latency_ms,
        context=conversation,
        rewriter=rewriter,
        rerank=ctx.rerank,
        synonyms_file=ctx.synonyms,
        auto=ctx.retrieval_auto,
    )
    return conversation, result


async def retrieve(state: CouncilState, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """Find the chunks the council will see, and start a fresh run on the thread."""
    ctx = runtime.context
    # The library's edge: the checked question (refused, repaired or cut, with notes) is the
    # one every later node and the memory see.
    question, notes = check_question(state.get("question"))
    progress = NodeProgress(agents.RETRIEVE)
    # SQLite and tokenizer files are blocking I/O: keep them off the event loop.
    rewriter = None
    if ctx.rewriter is not None:
        rewriter = backend_rewriter(resolve_backend(ctx.rewriter), asyncio.get_running_loop())
    info = runtime.execution_info
    scope = ctx.memory(info.thread_id if info else None)  # L2: this user's, this thread's
    recall = functools.partial(long_term_recall, runtime.store, scope, question)
    conversation, result = await asyncio.to_thread(_find, ctx, state, question, rewriter, recall)
    injected, cut_notes = _within_any_prompt(result.injected, ctx)
    chunks = chunks_to_state(injected)
    # The chunks found, whole, for whoever watches the run (the page lists them with their tags).
    found = result.to_dict()
    emit({"type": "retrieval", "node": agents.RETRIEVE, "retrieval": found, "chunks": chunks})
    timings = progress.done()
    # A thread keeps state between runs: the reducer fields start afresh for each question.
    return {
        "question": question,
        "started_at": time.time(),
        "conversation": conversation,
        "chunks": chunks,
        "retrieval": found,
        "proposals": Overwrite([]),
        "budgets": Overwrite([]),
        "rankings": Overwrite([]),
        "own": None,
        "timings": Overwrite(timings),
        "tool_calls": [],
        "notes": [*notes, *cut_notes],
    }


def _within_any_prompt(chunks: list[Chunk], ctx: CouncilContext) -> tuple[list[Chunk], list[str]]:
    """Chunks cut to what the run's largest prompt could show of one, with a note for each cut.

    `kb add` makes chunks of at most `MAX_CHUNK_CHARS`; an old KB may hold a huge one (a 20 MB
    paragraph). The budget's count-side bound keeps any chunk from being counted whole, and
    this keeps it from being carried whole through the graph's state and every checkpoint.
    """
    plans = [*PRESETS.values(), *map(ctx.budget_plan, ctx.budgets)]
    limit = FIRST_REACH * max(plan.n_ctx for plan in plans)
    out, notes = [], []
    for chunk in chunks:
        if len(chunk.text) > limit:
            notes.append(
                f"chunk {chunk.id} ({chunk.source}) holds {len(chunk.text):,} characters, more "
                f"than any prompt can show: only its first {limit:,} were used; add its file "
                "again (`collective kb add`) to split it into chunks"
            )
            chunk = replace(chunk, text=chunk.text[:limit])
        out.append(chunk)
    return out, notes
