"""Conversation memory in three tiers: L0 working, L1 session, L2 long-term (a LangGraph store)."""

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
