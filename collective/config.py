"""The effective configuration: defaults, one TOML file, `.env`, environment, command line.

Later layers win: built-in defaults < the TOML file (`--config`, else `$COLLECTIVE_CONFIG`, else
`collective.toml` in the working directory if present) < `.env` < environment variables
(`COLLECTIVE_<FIELD>`, complex values as JSON) < command-line options. Every value remembers the
layer it came from, for `collective config show`.

The keys are flat so that each has one obvious environment variable (`k` is `COLLECTIVE_K`,
`kb` is `COLLECTIVE_KB`, `usage_log` is `COLLECTIVE_USAGE_LOG`), the same variables the rest of
collective already reads. A minimal file:

```toml
k = 3
planner = "llama-server:http://127.0.0.1:8083"
judge = "ollama:gpt-oss-120b-judge@http://127.0.0.1:11434"

[[specialists]]
backend = "llama-server:http://127.0.0.1:8083"
count = 3

[output_caps]
specialist = 6000
```

With no file at all every role is `embedded` (the bundled model in process) and the KB is the
demo KB, which is what `make demo` runs.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import tomllib
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from collective import environment
from collective.budget.plans import BudgetSections, ModelBudget
from collective.errors import ConfigError
from collective.graph.context import (
    BudgetRef,
    CouncilContext,
    SpecialistGroup,
    SpecialistRef,
    check_spec,
    embedding_spec,
    known_roles,
    replica_set,
)
from collective.kb.expansion import DEFAULT_EXPANSION_MODEL
from collective.kb.profile_names import AppliedProfile, Evidence
from collective.kb.retrieval import ProfileSettings
from collective.local_files import read_regular_file
from collective.memory.tiers import L0_CAPACITY, L1_CAPACITY
from collective.models.embedded import EMBEDDED_JUDGE

__all__ = [
    "BudgetSections",
    "CollectiveConfig",
    "DEPRECATED_KEYS",
    "ENV_PREFIX",
    "EffectiveConfig",
    "MACHINE_KEYS",
    "Source",
    "SpecialistGroup",
    "load_config",
    "run_setting_names",
]

Source = Literal["default", "file", ".env", "env", "cli"]
"""Where a value came from, lowest precedence first."""

ENV_PREFIX = "COLLECTIVE_"
"""Every setting `name` is also the environment variable `COLLECTIVE_NAME`."""

DEFAULT_CONFIG_FILE = environment.DEFAULT_CONFIG_FILE

MACHINE_KEYS = ("checkpoints", "store", "usage_log", "telemetry", "kb_embeddings")
"""Settings of this machine, not of a run: a resumed run keeps the current ones."""

DEPRECATED_KEYS = {"budget_profiles": "allowance_profiles"}
"""Old setting names still accepted (with a note) -> their new names."""


def renamed(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`data` with each deprecated key moved to its new name, with a note (a FutureWarning).

    Raises:
        ConfigError: Both the old and the new name are set in one place.
    """
    out = dict(data)
    for old, new in DEPRECATED_KEYS.items():
        if old in out:
            if new in out:
                raise ConfigError(f"{where} sets both {old} and {new}; keep only {new}")
            warnings.warn(
                f"{where}: `{old}` is now `{new}` (memory allowances; `budget` names the prompt "
                f"plan only); rename it",
                FutureWarning,
                stacklevel=2,
            )
            out[new] = out.pop(old)
    return out


def _expansion_spec(value: str) -> str:
    """`none`, or a backend spec for the expansion model."""
    return value if value.strip() == "none" else check_spec(value)


def _location(key: str) -> Any:
    """A validator: a file path or a postgresql:// URL for `key`."""

    def check(value: str) -> str:
        from collective.memory.store import check_location

        return check_location(value, key)

    return check


def _spec(value: str | None) -> str | None:
    """A backend spec (a list of replicas joined first), refused early when malformed."""
    return None if value is None else check_spec(value)


def _judges(value: Any) -> Any:
    """The judge's fallback list, each entry one backend or a list of replicas."""
    if isinstance(value, list):
        if not value:
            raise ValueError("give at least one judge backend")
        return [replica_set(v) for v in value]
    return replica_set(value)


def _check_judges(value: str | list[str]) -> str | list[str]:
    return [check_spec(v) for v in value] if isinstance(value, list) else check_spec(value)


def _specialist_entries(value: Any) -> Any:
    return [replica_set(v) for v in value] if isinstance(value, list) else value


def _check_specialists(value: list[Any]) -> list[Any]:
    if not value:
        raise ValueError("give at least one specialist backend")
    return [check_spec(v) if isinstance(v, str) else v for v in value]


def _retrieval_profile(value: Any) -> Any:
    """A `[retrieval_profiles.NAME]` table as a `ProfileSettings` (`base` names one to start from).

    Each key is a `ProfileSettings` field; `base` (a built-in profile) supplies the others;
    `escalate_to = ""` keeps `auto` from escalating past it.
    """
    from collective.kb.retrieval import BUILTIN_PROFILES, ProfileSettings

    if isinstance(value, ProfileSettings) or not isinstance(value, Mapping):
        return value
    table = dict(value)
    base = table.pop("base", None)
    if "steps" in table and isinstance(table["steps"], list):
        table["steps"] = tuple(table["steps"])
    if table.get("escalate_to") == "":  # TOML has no null: "" escalates nowhere
        table["escalate_to"] = None
    try:
        if base is not None:
            if base not in BUILTIN_PROFILES:
                raise ValueError(f"base {base!r} is no built-in profile; use {BUILTIN_PROFILES}")
            return dataclasses.replace(BUILTIN_PROFILES[base], **table)
        return ProfileSettings(**table)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    except TypeError as exc:  # a missing or unknown key
        reason = str(exc).removeprefix("ProfileSettings.__init__() ").removeprefix("replace() ")
        raise ValueError(
            f'{reason}; a profile takes the ProfileSettings fields, and `base = "balanced"` '
            "(or lean, deep) gives those it leaves out"
        ) from None


_DEFAULT_SPECIALISTS: SpecialistRef = SpecialistGroup(backend=EMBEDDED_JUDGE, count=2)
"""The judge's own model sampled twice (`CouncilContext.specialists`)."""

BackendSpec = Annotated[str, BeforeValidator(replica_set), AfterValidator(check_spec)]
"""A backend spec; a list of equivalent servers (replicas) is joined into one spec."""

RetrievalProfile = Annotated[ProfileSettings, BeforeValidator(_retrieval_profile)]
"""A retrieval profile declared in the configuration (`[retrieval_profiles.NAME]`)."""


class CollectiveConfig(BaseSettings):
    """Every setting of collective, declared once: its type, default, meaning and variable.

    Each field `name` is also the environment variable `COLLECTIVE_NAME` (complex values as
    JSON) and the config file's key `name`; `load_config` layers the sources. The run's
    settings are stored with its thread, so a resume runs with them; the machine's
    (`MACHINE_KEYS`) are this machine's, and a resume keeps the current ones. Validating makes
    the run's `CouncilContext` once (`council_context`). docs/configuration.md is generated
    from this class (`collective.docs_reference`).
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    # -- the council --
    k: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Number of specialists (with `[[specialists]]` groups and no `k`: the sum "
        "of their counts).",
    )
    planner: BackendSpec | None = Field(
        default=None,
        description="The model that writes a plan (an angle per member) before the members "
        "answer; none by default: the members answer the question as it is.",
    )
    specialists: Annotated[
        list[SpecialistRef],
        BeforeValidator(_specialist_entries),
        AfterValidator(_check_specialists),
    ] = Field(
        default_factory=lambda: [_DEFAULT_SPECIALISTS],
        description="Backends of the specialists, cycled to `k` members: specs, or "
        "`{backend, count}` groups. Default: the judge's own model sampled twice.",
    )
    judge: Annotated[str | list[str], BeforeValidator(_judges), AfterValidator(_check_judges)] = (
        Field(
            default=EMBEDDED_JUDGE,
            description="The judge's backend, or a list tried in order (each failure is noted).",
        )
    )
    chat: BackendSpec | None = Field(
        default=None, description="The model of `collective chat`; default: the first judge."
    )
    quorum: int | None = Field(
        default=None,
        ge=1,
        description="Specialists that must answer for the judge to rule; default ceil(k/2).",
    )
    review: bool = Field(
        default=False,
        description="Run the anonymous peer-review round between the specialists and the judge.",
    )
    judge_tools: bool = Field(
        default=False,
        description="Let the judge call `kb_search` / `kb_get` before its verdict, where its "
        "backend has tools.",
    )
    tool_rounds: int = Field(
        default=3, ge=0, le=20, description="Most rounds of judge tool calls before the verdict."
    )
    temperature: float = Field(
        default=0.2, ge=0, le=2, description="Sampling temperature of every model call."
    )
    member_temperature_step: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Specialist i samples at `temperature + i * step` (at most 1.0), so members "
        "on one model differ on purpose.",
    )
    specialist_timeout_s: float = Field(
        default=600.0, gt=0, description="Time limit of one specialist's answer (seconds)."
    )
    call_timeout_s: float = Field(
        default=900.0, gt=0, description="Time limit of every other model call (seconds)."
    )
    entailment: Literal["none", "judge"] = Field(
        default="none",
        description="The claim check's entailment: `none` drops a claim numbers and names "
        "cannot settle; `judge` asks the judge's own model (in process) to decide it.",
    )
    confident_at: float | None = Field(
        default=None,
        le=0,
        description="Adaptive answering (docs/adaptive.md): where the lowest-window "
        "log-probability of the judge's own answer is at least this, it is the verdict and no "
        "member is asked; none: the members always answer.",
    )
    agree_early: int | None = Field(
        default=None,
        ge=2,
        description="Early stop: once this many answers (the judge's counted) name the same "
        "thing, the members still writing are cancelled; none: every member finishes.",
    )
    # -- the prompt plan --
    budgets: Annotated[dict[str, BudgetRef], AfterValidator(known_roles)] = Field(
        default_factory=dict,
        description="Prompt plan per role (`planner`, `specialist`, `reviewer`, `judge`, "
        "`chat`): a preset name or a `{n_ctx, output, sections}` table.",
    )
    output_caps: Annotated[dict[str, Annotated[int, Field(gt=0)]], AfterValidator(known_roles)] = (
        Field(default_factory=dict, description="Largest answer per role, below the plan's output.")
    )
    # -- the knowledge base and retrieval --
    kb: str | None = Field(
        default=None,
        description="The SQLite knowledge base; none: the demo KB (`.collective/kb.sqlite`).",
    )
    kb_embeddings: Annotated[str, AfterValidator(embedding_spec)] = Field(
        default="builtin",
        description="The KB's embedding model: `builtin`, `none`, `openai:MODEL@URL` or "
        "`ollama:MODEL@URL` (this machine's setting).",
    )
    kb_expansion: Annotated[str, AfterValidator(_expansion_spec)] = Field(
        default=DEFAULT_EXPANSION_MODEL,
        description="The model that writes chunk expansions at `kb add` (a backend spec), or "
        "`none`.",
    )
    kb_names: Annotated[str, AfterValidator(_expansion_spec)] = Field(
        default="none",
        description="The model that writes each document's trade names, acronyms and everyday "
        "names at `kb add` (a backend spec), or `none` (docs/kb-vocabulary.md: measured wrong "
        "too often on small models to be on by default).",
    )
    retrieval: str = Field(
        default="auto",
        description="Retrieval profile: `lean`, `balanced`, `deep`, one declared in "
        "`retrieval_profiles`, or `auto` (chosen per question).",
    )
    retrieval_profiles: dict[str, RetrievalProfile] = Field(
        default_factory=dict,
        description="Retrieval profiles of your own by name: `ProfileSettings` fields, `base` "
        "naming a built-in profile for the rest.",
    )
    retrieval_auto: dict[AppliedProfile, str] = Field(
        default_factory=dict,
        description="The profile `auto` applies in place of each of its choices (`lean`, "
        '`balanced`, `deep`), e.g. `{deep = "thorough"}`.',
    )
    max_inject: int | None = Field(
        default=None, ge=1, description="Most chunks retrieval injects; default: the profile's."
    )
    max_latency_ms: float | None = Field(
        default=None, gt=0, description="A latency target that makes `auto` choose a cheaper one."
    )
    evidence: Evidence = Field(
        default="auto",
        description="Specialists read the same chunks (`shared`), a shared head plus a slice "
        "each (`split`), or split when they do not fit one member's KB section (`auto`).",
    )
    hidden_tags: list[str] = Field(
        default_factory=lambda: ["meta"],
        description="Chunk tags the specialists do not see (the judge sees every chunk).",
    )
    rerank: Literal["engine", "embedded", "none"] = Field(
        default="engine",
        description="Deep retrieval's reranker: `engine` (the judge model's engine), "
        "`embedded` (a context of its own on the same weights) or `none`.",
    )
    rewriter: BackendSpec | None = Field(
        default=None,
        description="A model that rewrites queries for the deep profile; none: deterministic.",
    )
    synonyms: str = Field(
        default="",
        description="A synonym file replacing the packaged `data/synonyms.txt` (same format).",
    )
    # -- memory --
    summarizer: BackendSpec | None = Field(
        default=None, description="A model that writes memory summaries; none: extractive."
    )
    agent_profiles: dict[str, str] = Field(
        default_factory=dict,
        description="Agent (`plan`, `specialist-N`, `judge`) or role -> memory allowance "
        "profile name.",
    )
    allowance_profiles: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Memory allowance profiles of your own (`base_budget`, `max_budget`, "
        "`scope_weights`); `agent_profiles` may name them. Formerly `budget_profiles`.",
    )
    complexity_signals: str = Field(
        default="",
        description="A TOML file of task complexity signals replacing the packaged "
        "`data/complexity_signals.toml`.",
    )
    user_id: str | None = Field(
        default=None,
        description="Whose long-term memory this is; none: `configurable.user_id`, else `default`.",
    )
    memory_scope: Literal["thread", "user"] = Field(
        default="thread",
        description="Long-term memory recalled from this thread only, or from every thread of "
        "the same `user_id`.",
    )
    l0_capacity: int = Field(
        default=L0_CAPACITY, ge=100, description="L0 working-memory size in tokens."
    )
    l1_capacity: int = Field(
        default=L1_CAPACITY, ge=100, description="L1 session-memory size in tokens."
    )
    # -- this machine --
    usage_log: str | None = Field(
        default=environment.USAGE_LOG_PATH,
        description="JSON-lines log of every model call's budget use; none disables it.",
    )
    checkpoints: Annotated[str, AfterValidator(_location("checkpoints"))] = Field(
        default=environment.CHECKPOINTS_PATH,
        description="LangGraph checkpoints (threads): a SQLite file or a postgresql:// URL.",
    )
    store: Annotated[str, AfterValidator(_location("store"))] = Field(
        default=environment.STORE_PATH,
        description="L2 long-term memory (LangGraph store): a SQLite file or a postgresql:// URL.",
    )
    telemetry: Literal["none", "console", "otlp"] = Field(
        default="none",
        description="OpenTelemetry traces: none, to the console, or to an OTLP endpoint "
        "(`OTEL_EXPORTER_OTLP_ENDPOINT`).",
    )
    _context: CouncilContext = PrivateAttr()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only explicit values: `load_config` merges the layers itself to track sources."""
        return (init_settings,)

    @classmethod
    def env_var(cls, name: str) -> str:
        """The environment variable of field `name` (`k` -> `COLLECTIVE_K`)."""
        return f"{ENV_PREFIX}{name.upper()}"

    @model_validator(mode="before")
    @classmethod
    def _k_from_groups(cls, data: Any) -> Any:
        """No `k`: as many specialists as the `[[specialists]]` groups count (old names moved)."""
        if isinstance(data, dict):
            data = renamed(data, "settings")
        groups = data.get("specialists") if isinstance(data, dict) else None
        if isinstance(groups, list) and data.get("k") is None:
            counts = [g.get("count", 1) if isinstance(g, Mapping) else 1 for g in groups]
            if all(isinstance(c, int) for c in counts):
                return {**data, "k": max(1, sum(counts))}
        return data

    @model_validator(mode="after")
    def _build_context(self) -> CollectiveConfig:
        """Register the declared retrieval profiles, then make the run's context once."""
        from collective.kb.retrieval import PROFILES, register_profile

        for name, profile in self.retrieval_profiles.items():
            try:
                register_profile(name, profile)
            except ConfigError as exc:
                raise ValueError(f"retrieval_profiles.{name}: {exc}") from None
        known = ", ".join([*PROFILES, "auto"])
        if self.retrieval != "auto" and self.retrieval not in PROFILES:
            raise ValueError(f"retrieval: unknown profile {self.retrieval!r}; use {known}")
        for tier, name in self.retrieval_auto.items():
            if name not in PROFILES:
                raise ValueError(f"retrieval_auto.{tier}: unknown profile {name!r}; use {known}")
        values = {name: getattr(self, name) for name in run_setting_names()}
        try:
            self._context = CouncilContext(**values)
            self._context.check_budgets()
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if self.quorum is not None and self.quorum > self.members:
            raise ValueError(
                f"quorum {self.quorum} is more than the {self.members} specialists; lower it"
            )
        return self

    @property
    def judges(self) -> list[str]:
        """The judge's backends in the order they are tried."""
        return [str(spec) for spec in self._context.judges]

    @property
    def members(self) -> int:
        """The number of specialists (k, by default the sum of the group counts)."""
        return self.k

    @property
    def specialist_backends(self) -> list[str]:
        """One backend spec per configured specialist slot (groups expanded by count)."""
        return [str(spec) for spec in self._context.specialists]

    @property
    def chat_backend(self) -> str:
        """The backend of `collective chat`."""
        return self.chat or self.judges[0]

    def budget_plan(self, role: str) -> ModelBudget:
        """The role's prompt plan before fitting: its preset or its explicit sections."""
        return self._context.budget_plan(role)

    def role_backends(self) -> dict[str, list[str]]:
        """Backend specs per role, for the smoke test (`specialist` lists one per member)."""
        members = self.specialist_backends
        return {
            **({"planner": [self.planner]} if self.planner else {}),
            "specialist": [members[i % len(members)] for i in range(self.members)],
            "judge": self.judges,
            "chat": [self.chat_backend],
        }

    def council_context(self) -> CouncilContext:
        """The `CouncilContext` of a council run under this configuration.

        A copy of the one made when the configuration was validated: what it read (plans,
        memory profiles) is shared, not read again.
        """
        return copy.copy(self._context)


def run_setting_names() -> list[str]:
    """The settings a `CouncilContext` takes: every one but the machine's storage and tracing."""
    names = {f.name for f in dataclasses.fields(CouncilContext) if f.init}
    return [name for name in CollectiveConfig.model_fields if name in names]


class EffectiveConfig:
    """A validated configuration and the layer each value came from.

    Attributes:
        config: The validated settings.
        sources: Dotted key (`k`, `budgets.judge`, `output_caps.specialist`) -> its layer.
        file: The TOML file read, if any.
    """

    def __init__(
        self, config: CollectiveConfig, sources: dict[str, Source], file: Path | None
    ) -> None:
        self.config = config
        self.sources = sources
        self.file = file

    def rows(self) -> list[tuple[str, Any, Source]]:
        """`(key, value, source)` for every leaf of the effective configuration."""
        data = self.config.model_dump(mode="json")
        rows = []
        for key, value in _leaves(data):
            rows.append((key, value, self.source_of(key)))
        return rows

    def source_of(self, key: str) -> Source:
        """The layer that set `key` (or the nearest enclosing key), else `default`."""
        parts = key.split(".")
        for depth in range(len(parts), 0, -1):
            found = self.sources.get(".".join(parts[:depth]))
            if found is not None:
                return found
        return "default"


def _leaves(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Dotted leaves of nested dicts (lists are leaves: they are set as a whole)."""
    if isinstance(data, dict) and data:
        out: list[tuple[str, Any]] = []
        for key, value in data.items():
            out += _leaves(value, f"{prefix}.{key}" if prefix else str(key))
        return out
    return [(prefix, data)]


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge dicts (tables merge key by key; anything else is replaced)."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


MAX_CONFIG_BYTES = 1 << 20
"""The largest config file read (1 MiB; a deployment's is a few KiB)."""


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.exists() and not path.is_symlink():
        raise ConfigError(
            f"config file {path} does not exist; check the path or copy ops/collective.toml"
        )
    raw = read_regular_file(
        path, limit=MAX_CONFIG_BYTES, what="config file", fix="give a TOML file (--config FILE)"
    )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"cannot read config file {path}: not UTF-8 text ({exc}); give a TOML file"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def _env_layers(dotenv: Path | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Config values from `.env` and from the environment (complex ones decoded from JSON)."""
    from pydantic_settings import DotEnvSettingsSource, EnvSettingsSource

    fields = set(CollectiveConfig.model_fields) | set(DEPRECATED_KEYS)
    from_dotenv: dict[str, Any] = {}
    if dotenv is not None and dotenv.is_file():
        read_regular_file(dotenv, limit=MAX_CONFIG_BYTES, fix="keep .env to KEY=VALUE lines")
        try:
            raw = DotEnvSettingsSource(CollectiveConfig, env_file=dotenv)()
        except Exception as exc:  # pydantic-settings' SettingsError names the variable
            raise ConfigError(f"{dotenv}: {exc}") from None
        from_dotenv = {k: v for k, v in raw.items() if k in fields}
        variables = _dotenv_values(dotenv)
        from_dotenv.update(_deprecated_variables(variables))
        # Other variables in .env (OLLAMA_HOST, COLLECTIVE_CACHE, ...) apply as if exported,
        # unless the real environment already sets them.
        for name, value in variables.items():
            if name.lower().removeprefix("collective_") not in fields:
                os.environ.setdefault(name, value)
    try:
        from_env = EnvSettingsSource(CollectiveConfig)()
    except Exception as exc:
        raise ConfigError(f"environment: {exc}") from None
    from_env = {k: v for k, v in from_env.items() if k in fields}
    from_env.update(_deprecated_variables(os.environ))
    return from_dotenv, from_env


def _dotenv_values(path: Path) -> dict[str, str]:
    """The `KEY=VALUE` lines of a `.env` file (values that are set)."""
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


def _deprecated_variables(variables: Mapping[str, str]) -> dict[str, Any]:
    """Values of the old variables (`COLLECTIVE_BUDGET_PROFILES`), under their old keys."""
    found: dict[str, Any] = {}
    for old in DEPRECATED_KEYS:
        raw = variables.get(f"{ENV_PREFIX}{old.upper()}")
        if raw:
            try:
                found[old] = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{ENV_PREFIX}{old.upper()} is not JSON ({exc})") from None
    return found


_TYPE_TAGS = {"str", "int", "BudgetSections", "SpecialistGroup", "ProfileSettings"}
"""Names pydantic adds to an error's location for union members."""


def _describe(error: ValidationError, layers: Mapping[str, Mapping[str, Any]]) -> str:
    """`field.path: reason (from LAYER)` for each problem."""
    lines = []
    for problem in error.errors():
        loc = [str(p) for p in problem["loc"]]
        # Union members add their type name to the path; drop them for the reader.
        loc = [p for p in loc if p not in _TYPE_TAGS and "[" not in p]
        reason = " ".join(problem["msg"].removeprefix("Value error, ").split())
        key, _, rest = reason.partition(": ")
        if not loc and rest and key.split(".")[0] in CollectiveConfig.model_fields:
            # The context's own checks name their key first (`budgets.judge: ...`).
            loc, reason = key.split("."), rest
        path = ".".join(loc) or "(top level)"
        where = next(
            (name for name, data in reversed(list(layers.items())) if loc and loc[0] in data), None
        )
        lines.append(f"{path}: {reason}" + (f" (from {where})" if where else ""))
    return "; ".join(dict.fromkeys(lines))


def load_config(
    path: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    dotenv: str | os.PathLike[str] | None = ".env",
) -> EffectiveConfig:
    """Load and validate the configuration.

    Args:
        path: The TOML file; None uses `$COLLECTIVE_CONFIG`, else `collective.toml` in the
            working directory when it exists, else no file.
        overrides: Command-line values (None values are ignored).
        dotenv: The `.env` file to read (ignored when missing); None reads none.

    Raises:
        ConfigError: An unreadable or invalid file, or an invalid value from any layer; the
            message names the field path, the reason and the layer.
    """
    file: Path | None = None
    if path is not None:
        file = Path(path)
    elif environment.config_file() is not None:
        file = environment.config_file()
    elif Path(DEFAULT_CONFIG_FILE).is_file():
        file = Path(DEFAULT_CONFIG_FILE)
    from_file = _read_toml(file) if file is not None else {}
    from_dotenv, from_env = _env_layers(Path(dotenv) if dotenv is not None else None)
    from_cli = {k: v for k, v in (overrides or {}).items() if v is not None}
    layers: dict[str, Mapping[str, Any]] = {
        "file": renamed(from_file, f"config file {file}"),
        ".env": renamed(from_dotenv, str(dotenv)),
        "env": renamed(from_env, "environment"),
        "cli": renamed(from_cli, "options"),
    }
    merged: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for name, data in layers.items():
        merged = _merge(merged, data)
        for key, _ in _leaves(dict(data)):
            if key:
                sources[key] = name  # type: ignore[assignment]
    try:
        config = CollectiveConfig(**merged)
    except ValidationError as exc:
        where = f"config file {file}" if file is not None and from_file else "configuration"
        raise ConfigError(f"invalid {where}: {_describe(exc, layers)}") from None
    return EffectiveConfig(config, sources, file)
