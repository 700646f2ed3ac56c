"""The bridge between the council graph and the memory tiers.

The graph keeps `TieredMemory.to_dict()` in its state between the turns of a thread; these
helpers rebuild the memory, render the conversation-summary section, and record a finished run.

Long-term memory (L2) lives in the graph's store under `("collective", "memory", user_id,
thread_id)`: a run recalls its own thread's archived episodes, or, with the `user` scope, every
thread of its user; never another user's.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.store.base import BaseStore

from collective.budget.counting import TokenCounter, tiktoken_counter
from collective.memory.summarize import Summarizer
from collective.memory.tiers import L0_CAPACITY, L1_CAPACITY, TieredMemory

__all__ = [
    "SUMMARY_TOKENS",
    "MemoryScope",
    "conversation_summary",
    "load_memory",
    "long_term_recall",
    "memory_counter",
    "remember_turn",
]

RECALL_TOKENS = 500
"""The most of the conversation-summary section that recalled L2 episodes may take."""


@dataclass(frozen=True)
class MemoryScope:
    """Whose long-term memory a run writes and reads.

    Attributes:
        user_id: The user (or tenant) the memory belongs to.
        thread_id: The conversation thread.
        shared: Recall every thread of the user, not only this one (sharing on purpose).
        l0_capacity: L0 size in tokens.
        l1_capacity: L1 size in tokens.
    """

    user_id: str = "default"
    thread_id: str = "default"
    shared: bool = False
    l0_capacity: int = L0_CAPACITY
    l1_capacity: int = L1_CAPACITY

    @property
    def namespace(self) -> tuple[str, ...]:
        """Where this thread's archived episodes are written."""
        return ("collective", "memory", self.user_id, self.thread_id)

    @property
    def recall_prefix(self) -> tuple[str, ...]:
        """The namespaces recall reads: this thread's, or all of the user's when shared."""
        return self.namespace[:3] if self.shared else self.namespace

    @classmethod
    def of_run(
        cls,
        user_id: str | None,
        thread_id: str | None,
        scope: Literal["thread", "user"] = "thread",
        l0_capacity: int = L0_CAPACITY,
        l1_capacity: int = L1_CAPACITY,
    ) -> MemoryScope:
        """The scope of one run (unset ids are `default`)."""
        return cls(
            user_id or "default", thread_id or "default", scope == "user", l0_capacity, l1_capacity
        )


DECISION_LINE = re.compile(r"^\s*decision:\s*(\S.*)$", re.IGNORECASE | re.MULTILINE)
"""A line of a verdict that states a decision (`Decision: ...`): the only text pinned in L1."""

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
    scope: MemoryScope | None = None,
) -> TieredMemory:
    """The memory kept in graph state, or a fresh one, under `scope` (namespace, capacities)."""
    if not data:
        memory = TieredMemory(memory_counter(), store, summarizer=summarizer)
    else:
        memory = TieredMemory.from_dict(data, memory_counter(), store, summarizer)
    if scope is not None:
        memory.namespace = scope.namespace
        memory.l0_capacity, memory.l1_capacity = scope.l0_capacity, scope.l1_capacity
    return memory


def long_term_recall(
    store: BaseStore | None, scope: MemoryScope, question: str, max_tokens: int = RECALL_TOKENS
) -> str:
    """Archived episodes of the scope that share words with the question, best first."""
    if store is None:
        from collective.memory.store import process_store

        store = process_store()
    words = set(re.findall(r"\w{4,}", question.lower()))
    items = store.search(scope.recall_prefix, limit=200)
    scored = []
    for item in items:
        text = str(item.value.get("text", ""))
        overlap = len(words & set(re.findall(r"\w{4,}", text.lower())))
        if overlap:
            scored.append((overlap, item.updated_at, text))
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    counter, lines, used = memory_counter(), [], 0
    for _, _, text in scored:
        cost = counter.count(text) + 2
        if used + cost > max_tokens:
            break
        lines.append(f"- {text}")
        used += cost
    return "From long-term memory:\n" + "\n".join(lines) if lines else ""


def conversation_summary(data: dict[str, Any] | None, recalled: str = "") -> str:
    """The conversation so far (L1 + L0) and the recalled L2 episodes, within `SUMMARY_TOKENS`."""
    budget = SUMMARY_TOKENS - (memory_counter().count(recalled) + 2 if recalled else 0)
    summary = load_memory(data).summary(budget) if data else ""
    return "\n\n".join(part for part in (recalled, summary) if part)


def remember_turn(
    data: dict[str, Any] | None,
    store: BaseStore | None,
    *,
    run_id: str,
    question: str,
    answer: str,
    summarizer: Summarizer | None = None,
    scope: MemoryScope | None = None,
) -> TieredMemory:
    """Record one council run (question, verdict) as a completed task and two turns."""
    memory = load_memory(data, store, summarizer, scope)
    memory.begin_task(run_id, question)
    memory.add_turn("user", question)
    memory.add_turn("assistant", answer)
    verdict = answer.strip().split("\n", 1)[0][:300]
    # Only what the verdict states as a decision is pinned; the verdict itself is the task's
    # outcome, compressed and archived with its episode like any other.
    for decision in DECISION_LINE.findall(answer):
        memory.record_decision(decision.strip()[:300])
    memory.complete_task(run_id, verdict or "no verdict")
    return memory
