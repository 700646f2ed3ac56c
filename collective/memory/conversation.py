"""The bridge between the council graph and the memory tiers.

The graph keeps `TieredMemory.to_dict()` in its state between the turns of a thread; these
helpers rebuild the memory, render the conversation-summary section, and record a finished run.
"""

from __future__ import annotations

import functools
from typing import Any

from langgraph.store.base import BaseStore

from collective.budget.counting import TokenCounter, tiktoken_counter
from collective.memory.tiers import TieredMemory

__all__ = ["SUMMARY_TOKENS", "conversation_summary", "load_memory", "remember_turn"]

SUMMARY_TOKENS = 2_000
"""The largest conversation-summary allocation of any preset; nodes trim it to their own."""


@functools.cache
def _counter() -> TokenCounter:
    # Memory is model-independent; each node re-fits the summary with its model's own counter.
    return tiktoken_counter("cl100k_base")


def load_memory(data: dict[str, Any] | None, store: BaseStore | None = None) -> TieredMemory:
    """The memory kept in graph state, or a fresh one."""
    if not data:
        return TieredMemory(_counter(), store)
    return TieredMemory.from_dict(data, _counter(), store)


def conversation_summary(data: dict[str, Any] | None) -> str:
    """The conversation so far (L1 + L0), within `SUMMARY_TOKENS`."""
    return load_memory(data).summary(SUMMARY_TOKENS) if data else ""


def remember_turn(
    data: dict[str, Any] | None,
    store: BaseStore | None,
    *,
    run_id: str,
    question: str,
    answer: str,
) -> TieredMemory:
    """Record one council run (question, verdict) as a completed task and two turns."""
    memory = load_memory(data, store)
    memory.begin_task(run_id, question)
    memory.add_turn("user", question)
    memory.add_turn("assistant", answer)
    verdict = answer.strip().split("\n", 1)[0][:300]
    if verdict:
        memory.record_decision(verdict)
    memory.complete_task(run_id, verdict or "no verdict")
    return memory
