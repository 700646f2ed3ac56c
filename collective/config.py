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

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from collective import environment
from collective.budget.plans import BudgetSections
from collective.errors import ConfigError
from collective.kb.profile_names import Evidence, Profile

if TYPE_CHECKING:
    from collective.budget.plans import ModelBudget
    from collective.graph.context import CouncilContext

__all__ = [
    "BudgetSections",
    "CollectiveConfig",
    "EffectiveConfig",
    "Source",
    "SpecialistGroup",
    "load_config",
]

Source = Literal["default", "file", ".env", "env", "cli"]
"""Where a value came from, lowest precedence first."""

DEFAULT_CONFIG_FILE = "collective.toml"


def _check_spec(spec: str) -> str:
    """Refuse a malformed backend spec early, without loading anything (`registry.check_spec`)."""
    from collective.models.registry import check_spec

    try:
        return check_spec(spec)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def _judges(value: Any) -> Any:
    """The judge's fallback list, each entry one backend or a list of replicas."""
    return [_replica_set(v) for v in value] if isinstance(value, list) else value


def _replica_set(value: Any) -> Any:
    """A list of specs where one backend is expected: equivalent servers, one spec."""
    from collective.models.replicas import REPLICA_SEP

    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if not value:
            raise ValueError("give at least one backend")
        return REPLICA_SEP.join(value)
    return value


class SpecialistGroup(BaseModel):
    """`count` specialists on one backend."""

    model_config = ConfigDict(extra="forbid")

    backend: Annotated[str, BeforeValidator(_replica_set)] = Field(
        description="Backend spec, e.g. `llama-server:http://127.0.0.1:8083`, or a list of "
        "equivalent servers (replicas): each member runs on one with room."
    )
    count: int = Field(default=1, ge=1, le=64, description="Specialists on this backend.")

    @field_validator("backend")
    @classmethod
    def _spec(cls, value: str) -> str:
        return _check_spec(value)


def _check_budget(ref: str | BudgetSections) -> str | BudgetSections:
    """A known preset name, or explicit sections that add up."""
    from collective.budget.plans import PRESETS

    if isinstance(ref, str) and ref not in PRESETS:
        raise ValueError(
            f"unknown preset {ref!r}; use one of {', '.join(PRESETS)} or explicit sections "
            "(n_ctx, output, sections)"
        )
    if isinstance(ref, BudgetSections):
        try:
            ref.plan("explicit")
        except Exception as exc:  # BudgetError says what does not add up
            raise ValueError(str(exc)) from None
    return ref


def _location(key: str) -> Any:
    """A validator: a file path or a postgresql:// URL for `key`."""

    def check(value: str) -> str:
        from collective.memory.store import check_location

        return check_location(value, key)

    return check


BudgetSetting = Annotated[str | BudgetSections, AfterValidator(_check_budget)]
"""A role's budget: a preset name (`specialist`, `judge`, `planner`) or explicit sections."""
Role = Literal["planner", "specialist", "judge", "chat"]
"""Roles the config gives a budget and an output cap (`chat`: the `collective chat` model)."""


class CollectiveConfig(BaseSettings):
    """Every setting of collective, validated (the field docs are what `config show` means)."""

    model_config = SettingsConfigDict(env_prefix="COLLECTIVE_", extra="forbid")

    k: int | None = Field(
        default=None, ge=1, le=64, description="Specialists; default: the sum of the counts."
    )
    planner: Annotated[str, BeforeValidator(_replica_set)] = Field(
        default="embedded", description="Backend of the planner (a list: replicas)."
    )
    specialists: list[SpecialistGroup] = Field(
        default_factory=lambda: [SpecialistGroup(backend="embedded", count=3)],
        description="Specialist groups (backend and count each), cycled to k members.",
    )
    judge: Annotated[str | list[str], BeforeValidator(_judges)] = Field(
        default="embedded:qwen2.5-coder-1.5b",
        description="Backend of the judge, or a list tried in order (failures go to notes); "
        "a list inside it: replicas.",
    )
    rewriter: str | None = Field(
        default=None, description="Backend that rewrites queries for deep retrieval."
    )
    summarizer: str | None = Field(
        default=None, description="Backend that writes memory compression summaries."
    )
    chat: str | None = Field(
        default=None, description="Backend of `collective chat`; default: the judge's."
    )
    quorum: int | None = Field(default=None, ge=1, description="Default: ceil(k/2).")
    review: bool = Field(default=False, description="Anonymous peer review before the judge.")
    judge_tools: bool = Field(default=True, description="Judge may verify with KB tools.")
    tool_rounds: int = Field(default=3, ge=0, le=20)
    temperature: float = Field(default=0.2, ge=0, le=2)
    member_temperature_step: float = Field(
        default=0.3, ge=0, le=1, description="Specialist i samples at temperature + i * step."
    )
    specialist_timeout_s: float = Field(default=600.0, gt=0)
    call_timeout_s: float = Field(
        default=900.0, gt=0, description="Time limit of every other model call (plan, judge, ...)."
    )
    retrieval: Profile = "auto"
    max_inject: int | None = Field(default=None, ge=1)
    max_latency_ms: float | None = Field(default=None, gt=0)
    # -- evidence (issue 29) --
    evidence: Evidence = Field(
        default="auto",
        description="Specialists read the same chunks (shared), a shared head plus a slice "
        "each (split), or split when the chunks exceed one member's KB section (auto).",
    )
    # -- end evidence --
    kb: Path | None = Field(
        default=None, description="SQLite KB; default .collective/kb.sqlite, seeded with the demo."
    )
    hidden_tags: list[str] = Field(default_factory=lambda: ["meta"])
    budgets: dict[Role, BudgetSetting] = Field(
        default_factory=dict, description="Preset name or explicit sections per role."
    )
    output_caps: dict[Role, Annotated[int, Field(gt=0)]] = Field(
        default_factory=dict, description="Largest answer per role (tokens)."
    )
    agent_profiles: dict[str, str] = Field(
        default_factory=dict, description="Memory budget profile per agent or role."
    )
    budget_profiles: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Your own memory budget profiles: base_budget, max_budget, scope_weights.",
    )
    checkpoints: Annotated[str, AfterValidator(_location("checkpoints"))] = Field(
        default=environment.CHECKPOINTS_PATH,
        description="LangGraph checkpoints (threads): a SQLite file or a postgresql:// URL.",
    )
    store: Annotated[str, AfterValidator(_location("store"))] = Field(
        default=environment.STORE_PATH,
        description="L2 long-term memory (LangGraph store): a SQLite file or a postgresql:// URL.",
    )
    user_id: str | None = Field(
        default=None, description="Whose long-term memory runs use; default: `default`."
    )
    memory_scope: Literal["thread", "user"] = Field(
        default="thread",
        description="Recall L2 memory of the thread only, or of every thread of the user.",
    )
    l0_capacity: int = Field(default=8_000, ge=100, description="L0 working memory (tokens).")
    l1_capacity: int = Field(default=32_000, ge=100, description="L1 session memory (tokens).")
    usage_log: Path | None = Field(
        default=Path(environment.USAGE_LOG_PATH), description="Budget usage log (JSON lines)."
    )
    telemetry: Literal["none", "console", "otlp"] = "none"

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

    @field_validator("planner", "judge", "chat", "rewriter", "summarizer")
    @classmethod
    def _spec(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list):
            if not value:
                raise ValueError("give at least one judge backend")
            return [_check_spec(v) for v in value]
        return None if value is None else _check_spec(value)

    @property
    def judges(self) -> list[str]:
        """The judge's backends in the order they are tried."""
        return [self.judge] if isinstance(self.judge, str) else list(self.judge)

    @field_validator("budgets")
    @classmethod
    def _sections_each_role_needs(
        cls, value: dict[str, str | BudgetSections]
    ) -> dict[str, str | BudgetSections]:
        from collective.budget.plans import PRESETS, check_role_sections

        for role, ref in value.items():
            try:
                check_role_sections(role, PRESETS[ref] if isinstance(ref, str) else ref.plan(role))
            except ConfigError as exc:
                raise ValueError(f"budgets.{role}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _profiles_known(self) -> CollectiveConfig:
        from collective.budget.profiles import ProfileAssignments

        try:
            ProfileAssignments.from_settings(self)  # parsed once, shared with the run
        except ConfigError as exc:
            raise ValueError(f"agent_profiles / budget_profiles: {exc}") from None
        return self

    @model_validator(mode="after")
    def _quorum_reachable(self) -> CollectiveConfig:
        if self.quorum is not None and self.quorum > self.members:
            raise ValueError(
                f"quorum {self.quorum} is more than the {self.members} specialists; lower it"
            )
        return self

    @property
    def members(self) -> int:
        """The number of specialists (k)."""
        return self.k if self.k is not None else sum(g.count for g in self.specialists)

    @property
    def specialist_backends(self) -> list[str]:
        """One backend spec per configured specialist slot (groups expanded by count)."""
        return [g.backend for g in self.specialists for _ in range(g.count)]

    @property
    def chat_backend(self) -> str:
        """The backend of `collective chat`."""
        return self.chat or self.judges[0]

    def budget_plan(self, role: str) -> ModelBudget:
        """The role's budget plan before fitting: its preset or its explicit sections."""
        from collective.budget.plans import PRESETS, default_preset

        ref = self.budgets.get(role)  # type: ignore[call-overload]
        if isinstance(ref, BudgetSections):
            return ref.plan(role)
        return PRESETS[ref or default_preset(role)]

    def role_backends(self) -> dict[str, list[str]]:
        """Backend specs per role, for the smoke test (`specialist` lists one per member)."""
        members = self.specialist_backends
        return {
            "planner": [self.planner],
            "specialist": [members[i % len(members)] for i in range(self.members)],
            "judge": self.judges,
            "chat": [self.chat_backend],
        }

    def council_context(self) -> CouncilContext:
        """The `CouncilContext` of a council run under this configuration."""
        from collective.graph.context import CouncilContext

        # Explicit sections travel as a ModelBudget (`budgeted_call.fit_plan` reads either); the
        # chat plan and cap travel too (`collective chat` calls with this context).
        budgets = {
            r: ref if isinstance(ref, str) else self.budget_plan(r)
            for r, ref in self.budgets.items()
        }
        # One source of field names: a context field named like a setting takes its value;
        # only the fields whose shape differs are spelled out.
        names = {f.name for f in dataclasses.fields(CouncilContext)}
        shared = names & type(self).model_fields.keys()
        values: dict[str, Any] = {name: getattr(self, name) for name in shared}
        values.update(
            k=self.members,
            specialists=tuple(self.specialist_backends),
            kb=str(self.kb) if self.kb is not None else None,
            hidden_tags=tuple(self.hidden_tags),
            budgets=budgets,
            output_caps=dict(self.output_caps),
            usage_log=str(self.usage_log) if self.usage_log is not None else None,
            agent_profiles=dict(self.agent_profiles),
            budget_profiles=dict(self.budget_profiles),
        )
        return CouncilContext(**values)


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


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"config file {path} does not exist; check the path or copy ops/collective.toml"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}; check its permissions") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def _env_layers(dotenv: Path | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Config values from `.env` and from the environment (complex ones decoded from JSON)."""
    from pydantic_settings import DotEnvSettingsSource, EnvSettingsSource

    fields = set(CollectiveConfig.model_fields)
    from_dotenv: dict[str, Any] = {}
    if dotenv is not None and dotenv.is_file():
        try:
            raw = DotEnvSettingsSource(CollectiveConfig, env_file=dotenv)()
        except Exception as exc:  # pydantic-settings' SettingsError names the variable
            raise ConfigError(f"{dotenv}: {exc}") from None
        from_dotenv = {k: v for k, v in raw.items() if k in fields}
        # Other variables in .env (OLLAMA_HOST, COLLECTIVE_CACHE, ...) apply as if exported,
        # unless the real environment already sets them.
        from dotenv import dotenv_values

        for name, value in dotenv_values(dotenv).items():
            if value is not None and name.lower().removeprefix("collective_") not in fields:
                os.environ.setdefault(name, value)
    try:
        from_env = EnvSettingsSource(CollectiveConfig)()
    except Exception as exc:
        raise ConfigError(f"environment: {exc}") from None
    return from_dotenv, {k: v for k, v in from_env.items() if k in fields}


_TYPE_TAGS = {"str", "int", "BudgetSections"}
"""Names pydantic adds to an error's location for union members."""


def _describe(error: ValidationError, layers: Mapping[str, Mapping[str, Any]]) -> str:
    """`field.path: reason (from LAYER)` for each problem."""
    lines = []
    for problem in error.errors():
        loc = [str(p) for p in problem["loc"]]
        # Union members add their type name to the path; drop them for the reader.
        loc = [p for p in loc if p not in _TYPE_TAGS and "[" not in p]
        path = ".".join(loc) or "(top level)"
        where = next(
            (name for name, data in reversed(list(layers.items())) if loc and loc[0] in data), None
        )
        reason = " ".join(problem["msg"].removeprefix("Value error, ").split())
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
        "file": from_file,
        ".env": from_dotenv,
        "env": from_env,
        "cli": from_cli,
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
