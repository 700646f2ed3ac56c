"""Runtime settings of a council run, passed as LangGraph's `context` (never globals).

`CouncilContext` is a plain dataclass whose every field has a default, so a run without
`context=` uses the defaults, and a JSON object with the same keys (`langgraph dev`, the SDK)
is accepted as is: budget tables as plain dicts, lists for sequences.

The settings are declared in `collective.config.CollectiveConfig` (each with its description,
default and environment variable; docs/configuration.md is generated from it), which validates
them from the config file, `.env`, the environment and the command line and makes a context.
These fields are the run's part of them, with the same names and defaults (tests/unit/
test_config.py checks that they agree); the few a run reads from files or the environment when
made directly (`rerank`, `entailment`, `synonyms`, `complexity_signals`) default to the
environment's value, as the settings do.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    GetPydanticSchema,
    Tag,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    field_validator,
)
from pydantic_core import core_schema

from collective import environment
from collective.budget.plans import (
    BudgetRole,
    BudgetSections,
    ModelBudget,
    check_role_sections,
    default_preset,
    parse_plan,
)
from collective.errors import ConfigError
from collective.kb.profile_names import EVIDENCE_MODES, AppliedProfile, Evidence
from collective.kb.store import KnowledgeStore
from collective.memory.allowances import ProfileAssignments
from collective.memory.conversation import MemoryScope
from collective.memory.tiers import L0_CAPACITY, L1_CAPACITY
from collective.models.base import Backend
from collective.models.embedded import EMBEDDED_JUDGE

__all__ = [
    "BackendRef",
    "BudgetRef",
    "BudgetRole",
    "CouncilContext",
    "SpecialistGroup",
    "council_context",
    "embedding_spec",
    "judge_list",
    "known_roles",
    "open_knowledge",
]

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


def known_roles(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """Refuse a table keyed by something that is no role (`budgets.judgee`)."""
    roles = get_args(BudgetRole)
    unknown = [role for role in value if role not in roles]
    if unknown:
        raise ValueError(f"{', '.join(map(repr, unknown))} is no role; use {', '.join(roles)}")
    return value


def embedding_spec(value: str) -> str:
    """Refuse an embedder spec of no known form (`collective.kb.embeddings.parse_spec`)."""
    from collective.kb.embeddings import parse_spec

    try:
        parse_spec(value)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return value.strip()


def _keep_plans(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A `ModelBudget` object (a library caller's plan) passes as it is."""
    return value if isinstance(value, ModelBudget) else handler(value)


BudgetRef = Annotated[
    str | ModelBudget | BudgetSections,  # from JSON or a file: a `{n_ctx, output, sections}` table
    GetPydanticSchema(lambda _type, handler: handler(str | BudgetSections)),
    WrapValidator(_keep_plans),
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
"""A role's budget: a preset name, a `ModelBudget`, or explicit sections (`BudgetSections`, or
its `{n_ctx, output, sections}` table). Validated here for its shape only; `CouncilContext`
reads it into a plan (`parse_plan`), once."""


def check_spec(spec: str) -> str:
    """Refuse a malformed backend spec early, without loading anything (`registry.check_spec`)."""
    from collective.models.registry import check_spec

    try:
        return check_spec(spec)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def replica_set(value: Any) -> Any:
    """A list of specs where one backend is expected: equivalent servers, one spec."""
    from collective.models.replicas import REPLICA_SEP

    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if not value:
            raise ValueError("give at least one backend")
        return REPLICA_SEP.join(value)
    return value


class SpecialistGroup(BaseModel):
    """`count` specialists on one backend (the config file's `[[specialists]]` tables)."""

    model_config = ConfigDict(extra="forbid")

    backend: Annotated[str, BeforeValidator(replica_set)] = Field(
        description="Backend spec, e.g. `llama-server:http://127.0.0.1:8083`, or a list of "
        "equivalent servers (replicas): each member runs on one with room."
    )
    count: int = Field(default=1, ge=1, le=64, description="Specialists on this backend.")

    @field_validator("backend")
    @classmethod
    def _spec(cls, value: str) -> str:
        return check_spec(value)


def _specialist_kind(value: Any) -> str:
    return "SpecialistGroup" if isinstance(value, Mapping | SpecialistGroup) else "str"


SpecialistRef = Annotated[
    Annotated[SpecialistGroup, Tag("SpecialistGroup")] | Annotated[BackendRef, Tag("str")],
    Discriminator(_specialist_kind),
]
"""One entry of `specialists`: a backend, or a group of `count` specialists on one backend."""


@dataclass
class CouncilContext:
    """Who sits on the council and how it deliberates.

    Backends are given as spec strings (`embedded`, `llama-server:http://127.0.0.1:8083`,
    `openai:MODEL@http://127.0.0.1:8000`, `ollama:gpt-oss-120b-judge@http://127.0.0.1:11434`,
    `llamacpp:/path/model.gguf`; replicas joined by ` | `), as `Backend` objects, or as LangChain
    chat models (`collective.models.langchain_model`).
    """

    k: Annotated[int, Field(ge=1, le=64), WithJsonSchema({"type": "integer"})] = 2
    """Number of specialists (the config file's default: the sum of its group counts)."""
    planner: BackendRef | None = None
    """The model that writes the council's plan (an angle for each member) before they answer;
    None: no plan, the members answer the question as it is. None by default: no arm of the
    bundled eval had a plan, its best (the judge's answer weighed against samples of its model)
    had none, and on `make demo` the plan was 28% of the council's time (bench/README.md)."""
    specialists: Sequence[SpecialistRef] = (SpecialistGroup(backend=EMBEDDED_JUDGE, count=2),)
    """Backends of the specialists, cycled to `k` members: specs, `Backend` objects, or groups
    (`SpecialistGroup` or `{backend, count}`: `count` members on one backend), expanded to one
    entry per member when the context is made. The default samples the judge's own model twice:
    its answer weighed against two samples of its model was the bundled eval's best arm at its
    cost (`self-moa`, bench/README.md "Council vs one model"), ahead of three 0.5B members."""
    judge: BackendRef | Sequence[BackendRef] = EMBEDDED_JUDGE
    """The judge's backend, or a list tried in order: each failure is in the output's `notes`."""
    chat: BackendRef | None = None
    """The model of `collective chat`; default: the judge's (first) backend."""
    quorum: Annotated[int | None, Field(ge=1)] = None
    """Specialists that must answer for the judge to rule; default ceil(k/2)."""
    retrieval: str = "auto"
    """Retrieval profile: `lean`, `balanced`, `deep`, one registered (the settings'
    `retrieval_profiles`), or `auto` (chosen per question)."""
    retrieval_auto: Mapping[AppliedProfile, str] = field(default_factory=dict)
    """The profile `auto` applies in place of each of its choices (`{"deep": "thorough"}`)."""
    rerank: str = field(default_factory=lambda: environment.rerank() or "engine")
    """Deep retrieval's reranker: `engine`, `embedded` or `none`."""
    synonyms: str = field(default_factory=environment.synonyms_file)
    """A synonym file replacing the packaged one ("": the packaged one)."""
    max_inject: Annotated[int | None, Field(ge=1)] = None
    """Most chunks retrieval injects; default: the profile's."""
    max_latency_ms: Annotated[float | None, Field(gt=0)] = None
    """A latency target that makes `auto` choose a cheaper profile."""
    # -- evidence --
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
    kb_embeddings: Annotated[str, AfterValidator(embedding_spec)] = "builtin"
    """The SQLite KB's embedding model (`collective.kb.embeddings`): `builtin`, `none`,
    `openai:MODEL@http://HOST:PORT` or `ollama:MODEL@http://HOST:PORT` (a server of yours).
    A setting of this machine: a resumed run takes the current one."""
    hidden_tags: Sequence[str] = ("meta",)
    """Chunk tags that specialists do not see (the judge sees every chunk)."""
    budgets: Annotated[Mapping[str, BudgetRef], AfterValidator(known_roles)] = field(
        default_factory=dict
    )
    """Budget plan per role (`planner`, `specialist`, `reviewer`, `judge`, `chat`): a preset
    name, an explicit `ModelBudget` or a `{n_ctx, output, sections}` table; each read into a
    `ModelBudget` when the context is made. A role not named gets the preset named like it
    (`chat`: the specialist's). (Not the output's `budgets`: those are per-call reports.)"""
    output_caps: Annotated[
        Mapping[str, Annotated[int, Field(gt=0)]], AfterValidator(known_roles)
    ] = field(default_factory=dict)
    """Largest answer per role, below the plan's output budget."""
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.2
    member_temperature_step: Annotated[float, Field(ge=0, le=1)] = 0.3
    """Self-MoA sampling: specialist i (0-based) samples at `temperature + i * step` (at most
    1.0), so members on one model differ on purpose. Greedy runs (`temperature` 0) stay greedy."""
    specialist_timeout_s: Annotated[float, Field(gt=0)] = 600.0
    """Time limit of one specialist's answer (what it wrote by then is kept as partial)."""
    call_timeout_s: Annotated[float, Field(gt=0)] = 900.0
    """Time limit of every other model call (planner, reviewers, judge, rewriter)."""
    review: bool = False
    """Run the anonymous peer-review round between specialists and judge."""
    confident_at: Annotated[float | None, Field(le=0)] = None
    """Adaptive answering (docs/adaptive.md): the judge's own answer comes first, and where the
    lowest-window log-probability of its tokens (`Confidence.lowest`) is at least this, it is
    the verdict and no member is asked; below it (or where the backend cannot say), the members
    answer and the judge weighs them. None: off, the members answer beside the judge's own
    answer as always. The `adaptive` mode uses `DEFAULT_CONFIDENT_AT` where this is None."""
    agree_early: Annotated[int | None, Field(ge=2)] = None
    """Early stop (`collective.nodes.early_stop`): the members answer beside the judge's own
    answer, each in a call of its own, and once this many answers (the judge's counted) answer
    with the same thing, or the judge's own answer is confident (`confident_at`), the members
    still writing are cancelled and their slots freed. None: every member finishes."""
    judge_tools: bool = False
    """Let the judge verify claims with `kb_search` / `kb_get` where its backend has tools (off
    by default: the KB section already holds what the forced round fetched, it took a third of
    the judge's time, and small judges pasted its output into the verdict; every claim is
    checked against its chunk after the verdict instead)."""
    tool_rounds: Annotated[int, Field(ge=0, le=20)] = 3
    """Most rounds of judge tool calls before the verdict."""
    usage_log: str | None = None
    """JSON-lines usage log of every model call; None disables it."""
    entailment: str = field(default_factory=lambda: environment.entailment() or "none")
    """The claim check's entailment: `none` or `judge` (the judge's model decides)."""
    complexity_signals: str = field(default_factory=environment.complexity_signals_file)
    """A TOML file of task complexity signals replacing the packaged one ("": packaged)."""
    agent_profiles: Mapping[str, str] = field(default_factory=dict)
    """Agent (`plan`, `specialist-N`, `judge`) or role (`planner`, `specialist`) -> memory
    allowance profile name."""
    allowance_profiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Memory allowance profiles of your own by name (`base_budget`, `max_budget`,
    `scope_weights`), added to the built-in ones; `agent_profiles` may name them."""
    user_id: str | None = None
    """Whose memory this is: long-term memory (L2) lives under the user and the thread. None
    takes `configurable.user_id` from the run's config, else `default`."""
    memory_scope: Literal["thread", "user"] = "thread"
    """What long-term memory a run recalls: its own thread's (`thread`), or every thread of
    the same `user_id` (`user`, sharing on purpose). Nothing ever crosses user ids."""
    l0_capacity: Annotated[int, Field(ge=100)] = L0_CAPACITY
    """L0 working-memory size in tokens."""
    l1_capacity: Annotated[int, Field(ge=100)] = L1_CAPACITY
    """L1 session-memory size in tokens (past it, old episodes are archived to L2)."""
    memory_profiles: ProfileAssignments = field(init=False, repr=False, compare=False)
    """`agent_profiles` and `allowance_profiles`, read once when the context is made."""

    def __post_init__(self) -> None:
        """Read the settings that need reading, once: plans, specialist groups, profiles.

        Raises:
            ConfigError: A budget, a specialist group or a memory budget profile is invalid.
        """
        plans = {}
        for role, ref in dict(self.budgets).items():
            try:
                plans[role] = parse_plan(ref)
            except ConfigError as exc:
                raise ConfigError(f"budgets.{role}: {exc}") from None
        self.budgets = plans
        self._expand_specialists()
        self.hidden_tags = tuple(self.hidden_tags)
        try:
            self.memory_profiles = ProfileAssignments.from_settings(self)
        except ConfigError as exc:
            raise ConfigError(f"agent_profiles / allowance_profiles: {exc}") from None
        if self.evidence not in EVIDENCE_MODES:
            raise ConfigError(f"evidence {self.evidence!r}: use one of {', '.join(EVIDENCE_MODES)}")
        if self.memory_scope not in ("thread", "user"):
            raise ConfigError(f"memory_scope {self.memory_scope!r}: use 'thread' or 'user'")

    def _expand_specialists(self) -> None:
        """One entry per member in `specialists` (groups expanded by their counts)."""
        try:
            entries = [
                SpecialistGroup.model_validate(s) if isinstance(s, Mapping) else s
                for s in self.specialists
            ]
        except ValidationError as exc:
            raise ConfigError(f"specialists: {' '.join(str(exc).split())}") from None
        self.specialists = tuple(
            member
            for s in entries
            for member in ([s.backend] * s.count if isinstance(s, SpecialistGroup) else [s])
        )

    def budget_plan(self, role: str) -> ModelBudget:
        """The role's budget plan before fitting: its own, else the preset named like the role.

        Raises:
            ConfigError: The plan lacks a section the role needs (`check_role_sections`).
        """
        plan = parse_plan(self.budgets.get(role) or default_preset(role))  # a plan: as it is
        try:
            check_role_sections(role, plan)
        except ConfigError as exc:
            raise ConfigError(f"budgets.{role}: {exc}") from None
        return plan

    def check_budgets(self) -> None:
        """Refuse now a plan a role could not use (what `budget_plan` refuses at the call).

        Raises:
            ConfigError: Names the role and the missing sections.
        """
        for role in self.budgets:
            self.budget_plan(role)

    @property
    def judges(self) -> list[str | Backend]:
        """The judge's backends in the order they are tried (the first is the best model)."""
        return judge_list(self.judge)

    @property
    def quorum_needed(self) -> int:
        """The quorum in force."""
        return self.quorum if self.quorum is not None else math.ceil(self.k / 2)

    def member_temperature(self, index: int) -> float:
        """The sampling temperature of specialist `index` (0-based)."""
        if self.temperature <= 0:
            return 0.0
        return round(min(1.0, self.temperature + index * self.member_temperature_step), 3)

    def samples_alike(self, a: int, b: int) -> bool:
        """Whether members `a` and `b` sample one prompt alike, given no plan.

        One backend, one temperature above 0 (greedy samples would all be one answer) and the
        same chunks (`shared` evidence): such members are answered by one request for several
        completions, told apart by their seeds.
        """
        return (
            self.evidence == "shared"
            and self.member_temperature(a) > 0
            and self.member_backend(a) == self.member_backend(b)
            and self.member_temperature(a) == self.member_temperature(b)
        )

    def for_member(self, index: int) -> CouncilContext:
        """These settings as specialist `index` samples under them."""
        return self.but(temperature=self.member_temperature(index))

    def but(self, **changes: Any) -> CouncilContext:
        """A copy with `changes` to settings taken as they are (`temperature`, `user_id`, ...).

        What the context read when it was made (plans, specialists, memory profiles) is shared,
        not read again; to change those, make a new context.
        """
        read = {"budgets", "specialists", "agent_profiles", "allowance_profiles"} & changes.keys()
        if read:
            raise ValueError(f"{sorted(read)} are read when a context is made; make a new one")
        other = copy.copy(self)
        for name, value in changes.items():
            setattr(other, name, value)
        return other

    def memory(self, thread_id: str | None) -> MemoryScope:
        """The memory scope of a run on `thread_id` under these settings."""
        return MemoryScope.of_run(
            self.user_id, thread_id, self.memory_scope, self.l0_capacity, self.l1_capacity
        )

    def member_backend(self, index: int) -> str | Backend:
        """The backend of specialist `index` (0-based)."""
        backend = self.specialists[index % len(self.specialists)]
        return backend.backend if isinstance(backend, SpecialistGroup) else backend


def judge_list(judge: BackendRef | Sequence[BackendRef]) -> list[str | Backend]:
    """A `judge` setting as the list of backends tried in order.

    One judge may be a spec, a `Backend` or a LangChain chat model: only a list is a list.
    """
    one: Any = judge
    return list(one) if isinstance(one, list | tuple) else [one]


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
        if "budget_profiles" in context and "allowance_profiles" not in context:
            import warnings

            warnings.warn(
                "council context: `budget_profiles` is now `allowance_profiles`; rename it",
                FutureWarning,
                stacklevel=2,
            )
            context = {**context, "allowance_profiles": context["budget_profiles"]}
            del context["budget_profiles"]
        names = {f.name for f in dataclasses.fields(CouncilContext) if f.init}
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


_stores: dict[tuple[str, str], KnowledgeStore] = {}
"""Open SQLite KBs by (absolute path, embedder spec)."""


def open_knowledge(ctx: CouncilContext) -> KnowledgeStore:
    """The run's knowledge store: the one given, the SQLite KB at `kb`, or the demo KB.

    A SQLite KB embeds with the context's `kb_embeddings`.
    """
    if ctx.knowledge is not None:
        return ctx.knowledge
    from collective.kb.demo import default_kb_path, open_default_store

    # Keyed by the absolute path: the default KB is relative to the working directory, and a
    # process that changes directory must not keep reading the first one it opened.
    path = Path(ctx.kb or default_kb_path()).absolute()
    key = (str(path), ctx.kb_embeddings)
    if key not in _stores:
        _stores[key] = open_default_store(path, embeddings=ctx.kb_embeddings)
    return _stores[key]
