"""Runtime settings of a council run, passed as LangGraph's `context` (never globals)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from collective.budget.plans import ModelBudget

if TYPE_CHECKING:
    from collective.models.base import Backend

__all__ = ["CouncilContext"]


@dataclass
class CouncilContext:
    """Who sits on the council and how it deliberates.

    Backends are given as spec strings (`embedded`, `llama-server:http://127.0.0.1:8083`,
    `ollama:gpt-oss-120b-judge@http://127.0.0.1:11434`, `llamacpp:/path/model.gguf`) or as
    `Backend` objects.
    """

    k: int = 3
    """Number of specialists."""
    planner: str | Backend = "embedded"
    specialists: Sequence[str | Backend] = ("embedded",)
    """Backends of the specialists, cycled when fewer than `k` are given."""
    judge: str | Backend = "embedded:qwen2.5-coder-1.5b"
    quorum: int | None = None
    """Specialists that must answer for the judge to rule; default ceil(k/2)."""
    retrieval: str = "auto"
    """Retrieval profile (`collective.kb.retrieval.Profile`)."""
    max_inject: int | None = None
    max_latency_ms: float | None = None
    rewriter: str | Backend | None = None
    """A model that rewrites queries for the deep retrieval profile (deterministic if None)."""
    summarizer: str | Backend | None = None
    """A model that writes memory compression summaries (extractive if None)."""
    kb_path: str | None = None
    """SQLite knowledge base; None uses the demo KB shipped with collective."""
    knowledge: Any = None
    """A `KnowledgeStore` object (e.g. `RetrieverKnowledgeStore`); overrides `kb_path`."""
    hidden_tags: Sequence[str] = ("meta",)
    """Chunk tags that specialists do not see (the judge sees every chunk)."""
    budgets: Mapping[str, str | ModelBudget] = field(default_factory=dict)
    """Budget per role (`planner`, `specialist`, `reviewer`, `judge`): a preset name or an
    explicit `ModelBudget`; defaults to the preset named like the role."""
    output_caps: Mapping[str, int] = field(default_factory=dict)
    """Largest answer per role, below the plan's output budget."""
    temperature: float = 0.2
    member_temperature_step: float = 0.3
    """Self-MoA sampling: specialist i (0-based) samples at `temperature + i * step` (at most
    1.0), so members on one model differ on purpose. Greedy runs (`temperature` 0) stay greedy."""
    specialist_timeout_s: float = 600.0
    retry_attempts: int = 2
    """Attempts per node on transient backend errors (LangGraph `RetryPolicy`)."""
    review: bool = False
    """Run the anonymous peer-review round between specialists and judge."""
    judge_tools: bool = True
    """Let the judge verify claims with `kb_search` / `kb_get` where its backend has tools."""
    tool_rounds: int = 3
    usage_log: str | None = None
    """JSON-lines usage log of every model call; None disables it."""
    agent_profiles: Mapping[str, str] = field(default_factory=dict)
    """Agent (planner, specialist-N, judge) -> memory budget profile name."""

    @property
    def quorum_needed(self) -> int:
        """The quorum in force."""
        return self.quorum if self.quorum is not None else math.ceil(self.k / 2)

    def member_temperature(self, index: int) -> float:
        """The sampling temperature of specialist `index` (0-based)."""
        if self.temperature <= 0:
            return 0.0
        return round(min(1.0, self.temperature + index * self.member_temperature_step), 3)

    def for_member(self, index: int) -> CouncilContext:
        """These settings as specialist `index` samples under them."""
        return dataclasses.replace(self, temperature=self.member_temperature(index))

    def member_backend(self, index: int) -> str | Backend:
        """The backend of specialist `index` (0-based)."""
        return self.specialists[index % len(self.specialists)]
