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
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from collective import environment
from collective.budget.plans import BudgetSections, ModelBudget
from collective.errors import ConfigError
from collective.graph.context import CouncilContext, SpecialistGroup, check_spec, replica_set
from collective.local_files import read_regular_file

__all__ = [
    "BudgetSections",
    "CollectiveConfig",
    "EffectiveConfig",
    "MACHINE_KEYS",
    "Source",
    "SpecialistGroup",
    "load_config",
]

Source = Literal["default", "file", ".env", "env", "cli"]
"""Where a value came from, lowest precedence first."""

DEFAULT_CONFIG_FILE = environment.DEFAULT_CONFIG_FILE

MACHINE_KEYS = ("checkpoints", "store", "usage_log", "telemetry", "kb_embeddings")
"""Settings of this machine, not of a run: a resumed run keeps the current ones."""


def _judges(value: Any) -> Any:
    """The judge's fallback list, each entry one backend or a list of replicas."""
    return [replica_set(v) for v in value] if isinstance(value, list) else value


def _location(key: str) -> Any:
    """A validator: a file path or a postgresql:// URL for `key`."""

    def check(value: str) -> str:
        from collective.memory.store import check_location

        return check_location(value, key)

    return check


def _run_fields() -> dict[str, Any]:
    """`CouncilContext`'s fields as settings: each field's type, bounds and default.

    The context is the one list of a run's settings; `knowledge` (an object) is no setting,
    nor is what the context reads from the others (`memory_profiles`), and the usage log is on
    by default for runs of the command line (`USAGE_LOG_PATH`).
    """
    import typing

    hints = typing.get_type_hints(CouncilContext, include_extras=True)
    defaults: dict[str, Any] = {"usage_log": environment.USAGE_LOG_PATH}
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(CouncilContext):
        if f.name == "knowledge" or not f.init:
            continue
        if f.name in defaults:
            fields[f.name] = (hints[f.name], defaults[f.name])
        elif f.default_factory is not dataclasses.MISSING:
            fields[f.name] = (hints[f.name], Field(default_factory=f.default_factory))
        else:
            fields[f.name] = (hints[f.name], f.default)
    return fields


_RunSettings: Any = create_model("_RunSettings", __base__=BaseSettings, **_run_fields())


class CollectiveConfig(_RunSettings):
    """Every setting of collective, validated: the run's and this machine's.

    The run's are `CouncilContext`'s fields (`_RunSettings`), declared there only; the
    machine's are `checkpoints`, `store` and `telemetry`, and of the context's, `usage_log` and
    `kb_embeddings` are the machine's too (`MACHINE_KEYS`: a resume keeps the current ones).
    Validating builds the run's context once (`council_context`), which reads the budgets and
    profiles.
    """

    model_config = SettingsConfigDict(env_prefix="COLLECTIVE_", extra="forbid")

    checkpoints: Annotated[str, AfterValidator(_location("checkpoints"))] = Field(
        default=environment.CHECKPOINTS_PATH,
        description="LangGraph checkpoints (threads): a SQLite file or a postgresql:// URL.",
    )
    store: Annotated[str, AfterValidator(_location("store"))] = Field(
        default=environment.STORE_PATH,
        description="L2 long-term memory (LangGraph store): a SQLite file or a postgresql:// URL.",
    )
    telemetry: Literal["none", "console", "otlp"] = "none"
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

    @field_validator("planner", mode="before")
    @classmethod
    def _planner_replicas(cls, value: Any) -> Any:
        return replica_set(value)

    @field_validator("specialists", mode="before")
    @classmethod
    def _specialist_replicas(cls, value: Any) -> Any:
        return [replica_set(v) for v in value] if isinstance(value, list) else value

    @field_validator("judge", mode="before")
    @classmethod
    def _judge_replicas(cls, value: Any) -> Any:
        return _judges(value)

    @field_validator("planner", "judge", "chat", "rewriter", "summarizer")
    @classmethod
    def _spec(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list):
            if not value:
                raise ValueError("give at least one judge backend")
            return [check_spec(v) for v in value]
        return None if value is None else check_spec(value)

    @field_validator("specialists")
    @classmethod
    def _specialist_specs(cls, value: list[Any]) -> list[Any]:
        if not value:
            raise ValueError("give at least one specialist backend")
        return [check_spec(v) if isinstance(v, str) else v for v in value]

    @model_validator(mode="before")
    @classmethod
    def _k_from_groups(cls, data: Any) -> Any:
        """No `k`: as many specialists as the `[[specialists]]` groups count."""
        groups = data.get("specialists") if isinstance(data, dict) else None
        if isinstance(groups, list) and data.get("k") is None:
            counts = [g.get("count", 1) if isinstance(g, Mapping) else 1 for g in groups]
            if all(isinstance(c, int) for c in counts):
                return {**data, "k": max(1, sum(counts))}
        return data

    @model_validator(mode="after")
    def _build_context(self) -> CollectiveConfig:
        """The run's context, made once: it reads the budgets and profiles (`CouncilContext`)."""
        values = {name: getattr(self, name) for name in _RunSettings.model_fields}
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
        """The role's budget plan before fitting: its preset or its explicit sections."""
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

    fields = set(CollectiveConfig.model_fields)
    from_dotenv: dict[str, Any] = {}
    if dotenv is not None and dotenv.is_file():
        read_regular_file(dotenv, limit=MAX_CONFIG_BYTES, fix="keep .env to KEY=VALUE lines")
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


_TYPE_TAGS = {"str", "int", "BudgetSections", "SpecialistGroup"}
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
