"""Conversation memory in three tiers: L0 working, L1 session, L2 long-term (a LangGraph store).

Also each agent's memory allowance (`allowances`) and the monitor of its use (`usage`).
"""

from collective.memory.summarize import ExtractiveSummarizer, Summarizer
from collective.memory.tiers import (
    MemoryEvent,
    MemoryIntegrityError,
    MemoryMetrics,
    MemoryStateError,
    TieredMemory,
)

__all__ = [
    "ExtractiveSummarizer",
    "MemoryEvent",
    "MemoryIntegrityError",
    "MemoryMetrics",
    "MemoryStateError",
    "Summarizer",
    "TieredMemory",
]
