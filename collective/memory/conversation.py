"""The bridge between the council graph and the memory tiers.

The graph keeps `TieredMemory.to_dict()` in its state between the turns of a thread; these
helpers rebuild the memory, render the conversation-summary section, and record a finished run.
"""

from __future__ import annotations

import functools
from typing import Any

from langgraph.store.base import BaseStore

from collective.budget.counting import TokenCounter, tiktoken_counter
from collective.memory.summarize import Summarizer
from collective.memory.tiers import TieredMemory

__all__ = [
    "SUMMARY_TOKENS",
    "conversation_summary",
    "load_memory",
    "memory_counter",
    "remember_turn",
]

SUMMARY_TOKENS = 2_000
"""The largest conversation-summary allocation of any preset; nodes trim it to their own."""


@functools.cache
def memory_counter() -> TokenCounter:
    """The counter the memory tiers use; each node re-fits the summary with its own counter."""
    return tiktoken_counter("cl100k_base")


def load_memory(
    data: dict[str, Any] | None,
    store: BaseStore | None = None,
    summarizer: Summarizer | None = None,
) -> TieredMemory:
    """The memory kept in graph state, or a fresh one."""
    if not data:
        return TieredMemory(memory_counter(), store, summarizer=summarizer)
    return TieredMemory.from_dict(data, memory_counter(), store, summarizer)


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
    summarizer: Summarizer | None = None,
) -> TieredMemory:
    """Record one council run (question, verdict) as a completed task and two turns."""
    memory = load_memory(data, store, summarizer)
    memory.begin_task(run_id, question)
    memory.add_turn("user", question)
    memory.add_turn("assistant", answer)
    verdict = answer.strip().split("\n", 1)[0][:300]
    if verdict:
        memory.record_decision(verdict)
    memory.complete_task(run_id, verdict or "no verdict")
    return memory
