"""Runtime settings of a council run, passed as LangGraph's `context` (never globals).

`CouncilContext` is a plain dataclass whose every field has a default, so a run without
`context=` uses the defaults, and a JSON object with the same keys (`langgraph dev`, the SDK)
is accepted as is: budget tables as plain dicts, lists for sequences.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import GetPydanticSchema, WithJsonSchema
from pydantic_core import core_schema

from collective.budget.plans import BudgetSections, ModelBudget
from collective.errors import ConfigError
from collective.kb.profile_names import EVIDENCE_MODES, Evidence
from collective.memory.conversation import MemoryScope
from collective.models.base import Backend

__all__ = ["BackendRef", "BudgetRef", "CouncilContext", "council_context"]

BackendRef = Annotated[
    str | Backend,
    GetPydanticSchema(
        lambda _type, _handler: core_schema.union_schema(
            [core_schema.str_schema(), core_schema.is_instance_schema(Backend)]
        )
    ),
    WithJsonSchema(
        {
            "type": "string",
            "description": "Backend spec: `embedded`, `llama-server:http://HOST:PORT`, "
            "`openai:MODEL@http://HOST:PORT`, `ollama:MODEL@http://HOST:PORT` or "
            "`llamacpp:/path.gguf`; specs joined by ` | ` are replicas (or, in process, a "
            "`Backend` object or a LangChain chat model).",
        }
    ),
]
"""A backend spec string (` | ` joins replicas), or a `Backend` object or LangChain chat model
when the council runs in process."""

BudgetRef = Annotated[
    str | ModelBudget,  # and, from JSON, a `{n_ctx, output, sections}` dict (`__post_init__`)
    GetPydanticSchema(
        lambda _type, _handler: core_schema.union_schema(
            [
                core_schema.str_schema(),
                core_schema.is_instance_schema(ModelBudget),
                core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()),
            ]
        )
    ),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "description": "A preset: planner, specialist, judge."},
                {
                    "type": "object",
                    "description": "Explicit sections, as in the config file.",
                    "properties": {
                        "n_ctx": {"type": "integer"},
                        "output": {"type": "integer"},
                        "prompt": {"type": "integer"},
                        "sections": {"type": "object", "additionalProperties": {"type": "integer"}},
                    },
                    "required": ["n_ctx", "output", "sections"],
                },
            ]
        }
    ),
]
"""A role's budget: a preset name, a `ModelBudget`, or `{n_ctx, output, sections}`."""


@dataclass
class CouncilContext:
    """Who sits on the council and how it deliberates.

    Backends are given as spec strings (`embedded`, `llama-server:http://127.0.0.1:8083`,
    `openai:MODEL@http://127.0.0.1:8000`, `ollama:gpt-oss-120b-judge@http://127.0.0.1:11434`,
    `llamacpp:/path/model.gguf`; replicas joined by ` | `), as `Backend` objects, or as LangChain
    chat models (`collective.models.langchain_model`).
    """

    k: int = 3
    """Number of specialists."""
    planner: BackendRef = "embedded"
    specialists: Sequence[BackendRef] = ("embedded",)
    """Backends of the specialists, cycled when fewer than `k` are given."""
    judge: BackendRef | Sequence[BackendRef] = "embedded:qwen2.5-coder-1.5b"
    """The judge's backend, or a list tried in order: each failure is in the output's `notes`."""
    quorum: int | None = None
    """Specialists that must answer for the judge to rule; default ceil(k/2)."""
    retrieval: str = "auto"
    """Retrieval profile (`collective.kb.retrieval.Profile`)."""
    max_inject: int | None = None
    max_latency_ms: float | None = None
    # -- evidence (issue 29) --
    evidence: Evidence = "auto"
    """How the specialists read the chunks (`collective.kb.evidence`): all the same ones
    (`shared`), a shared head plus a slice each (`split`), or split when they do not fit one
    member's KB section (`auto`)."""
    # -- end evidence --
    rewriter: BackendRef | None = None
    """A model that rewrites queries for the deep retrieval profile (deterministic if None)."""
    summarizer: BackendRef | None = None
    """A model that writes memory compression summaries (extractive if None)."""
    kb: str | None = None
    """SQLite knowledge base; None uses the demo KB shipped with collective."""
    knowledge: Any = None
    """A `KnowledgeStore` object (e.g. `RetrieverKnowledgeStore`); overrides `kb`."""
    hidden_tags: Sequence[str] = ("meta",)
    """Chunk tags that specialists do not see (the judge sees every chunk)."""
    budgets: Mapping[str, BudgetRef] = field(default_factory=dict)
    """Budget per role (`planner`, `specialist`, `reviewer`, `judge`, `chat`): a preset name, an
    explicit `ModelBudget` or a `{n_ctx, output, sections}` table (turned into a
    `ModelBudget`); defaults to the preset named like the role (`chat`: the specialist's)."""
    output_caps: Mapping[str, int] = field(default_factory=dict)
    """Largest answer per role, below the plan's output budget."""
    temperature: float = 0.2
    member_temperature_step: float = 0.3
    """Self-MoA sampling: specialist i (0-based) samples at `temperature + i * step` (at most
    1.0), so members on one model differ on purpose. Greedy runs (`temperature` 0) stay greedy."""
    specialist_timeout_s: float = 600.0
    call_timeout_s: float = 900.0
    """Time limit of every other model call (planner, reviewers, judge, rewriter)."""
    review: bool = False
    """Run the anonymous peer-review round between specialists and judge."""
    judge_tools: bool = True
    """Let the judge verify claims with `kb_search` / `kb_get` where its backend has tools."""
    tool_rounds: int = 3
    usage_log: str | None = None
    """JSON-lines usage log of every model call; None disables it."""
    agent_profiles: Mapping[str, str] = field(default_factory=dict)
    """Agent (`plan`, `specialist-N`, `judge`) or role (`planner`, `specialist`) -> memory
    budget profile name."""
    budget_profiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Profiles of your own by name (`base_budget`, `max_budget`, `scope_weights`), added to
    the built-in ones; `agent_profiles` may name them."""
    user_id: str | None = None
    """Whose memory this is: long-term memory (L2) lives under the user and the thread. None
    takes `configurable.user_id` from the run's config, else `default`."""
    memory_scope: Literal["thread", "user"] = "thread"
    """What long-term memory a run recalls: its own thread's (`thread`), or every thread of
    the same `user_id` (`user`, sharing on purpose). Nothing ever crosses user ids."""
    l0_capacity: int = 8_000
    """L0 working-memory size in tokens."""
    l1_capacity: int = 32_000
    """L1 session-memory size in tokens (past it, old episodes are archived to L2)."""

    def __post_init__(self) -> None:
        budgets = {}
        for role, ref in dict(self.budgets).items():
            if isinstance(ref, Mapping):
                from pydantic import ValidationError

                try:
                    ref = BudgetSections(**ref).plan(role)
                except (ValidationError, TypeError, ValueError) as exc:
                    raise ConfigError(
                        f"budgets.{role}: give a preset name or {{n_ctx, output, sections}} "
                        f"({' '.join(str(exc).split())})"
                    ) from None
            budgets[role] = ref
        self.budgets = budgets
        self.specialists = tuple(self.specialists)
        self.hidden_tags = tuple(self.hidden_tags)
        from collective.budget.profiles import ProfileAssignments

        ProfileAssignments.from_settings(self)  # an unknown or invalid profile fails here
        if self.evidence not in EVIDENCE_MODES:
            raise ConfigError(f"evidence {self.evidence!r}: use one of {', '.join(EVIDENCE_MODES)}")
        if self.memory_scope not in ("thread", "user"):
            raise ConfigError(f"memory_scope {self.memory_scope!r}: use 'thread' or 'user'")

    @property
    def judges(self) -> list[str | Backend]:
        """The judge's backends in the order they are tried (the first is the best model)."""
        # One judge may be a spec, a Backend or a LangChain chat model: only a list is a list.
        judge: Any = self.judge
        return list(judge) if isinstance(judge, list | tuple) else [judge]

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

    def memory(self, thread_id: str | None) -> MemoryScope:
        """The memory scope of a run on `thread_id` under these settings."""
        return MemoryScope.of_run(
            self.user_id, thread_id, self.memory_scope, self.l0_capacity, self.l1_capacity
        )

    def member_backend(self, index: int) -> str | Backend:
        """The backend of specialist `index` (0-based)."""
        return self.specialists[index % len(self.specialists)]


def council_context(context: Any) -> CouncilContext:
    """The run's `CouncilContext`: the given one, the defaults for None, or one built from a dict.

    Raises:
        ConfigError: `context` is some other object (e.g. a parent graph's own context).
    """
    if context is None:
        return CouncilContext()
    if isinstance(context, CouncilContext):
        return context
    if isinstance(context, Mapping):
        names = {f.name for f in dataclasses.fields(CouncilContext)}
        unknown = sorted(set(context) - names)
        if unknown:
            raise ConfigError(
                f"council context has unknown keys {unknown}; the keys are those of "
                "collective.graph.CouncilContext"
            )
        return CouncilContext(**context)
    raise ConfigError(
        f"the council got a {type(context).__name__} as its context; it needs a "
        "collective.graph.CouncilContext (or none, for the defaults). Mount it in a parent graph "
        "with collective.graph.council_node(council, context=CouncilContext(...)), which runs "
        "it with its own context"
    )
