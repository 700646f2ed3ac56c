"""Memory allowances: how many memory tokens an agent may load for a task.

The `allowance_profiles` setting names them and `agent_profiles` assigns them (the prompt's own
budget, its sections and their sizes, is `collective.budget`).

A profile has a base budget, a hard maximum and scope weights that split the budget across the
three memory scopes (`global` knowledge, the agent's `agent_recent` conversation, and its
`agent_patterns`: role instructions, task framing, proposals). The budget for one call is

    budget = min(base_budget x multiplier(complexity), max_budget)

with multipliers simple 0.5, medium 1.0, complex 1.5, multi-system 2.0. Complexity is detected
from the task text by keyword and length signals, each match named in the reason, or set by hand.

Enforcement is soft: a call that loads more than its budget is bumped to the next complexity
tier (never past `max_budget`) and the bump is recorded on the `AgentBudget`, so the usage log
and `collective allowances report` can recommend a larger profile.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from collective import environment
from collective.agents import role_of
from collective.errors import ConfigError

__all__ = [
    "COMPLEXITY_MULTIPLIERS",
    "COMPLEXITY_ORDER",
    "DEFAULT_ASSIGNMENTS",
    "DEFAULT_PROFILES",
    "MEMORY_SCOPES",
    "AgentBudget",
    "AllowanceProfile",
    "BudgetProfile",
    "Complexity",
    "ComplexityAssessment",
    "ProfileAssignments",
    "bump",
    "detect_complexity",
    "resolve_budget",
    "split_budget",
]

Complexity = Literal["simple", "medium", "complex", "multi-system"]

COMPLEXITY_ORDER: tuple[Complexity, ...] = get_args(Complexity)
"""Complexity tiers, smallest first; a bump moves one step to the right."""

COMPLEXITY_MULTIPLIERS: dict[Complexity, float] = {
    "simple": 0.5,
    "medium": 1.0,
    "complex": 1.5,
    "multi-system": 2.0,
}

MEMORY_SCOPES = ("global", "agent_recent", "agent_patterns")
"""The memory scopes a profile's weights split its budget across."""


class AllowanceProfile(BaseModel):
    """A named budget profile (`specialist-narrow`, ...); scope weights sum to 1."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    base_budget: int = Field(gt=0, description="Tokens for a medium-complexity task.")
    max_budget: int = Field(gt=0, description="Cap on the budget, whatever the complexity.")
    scope_weights: dict[str, float] = Field(description="Share of the budget per memory scope.")

    @model_validator(mode="after")
    def _check(self) -> AllowanceProfile:
        if self.max_budget < self.base_budget:
            raise ValueError(
                f"profile {self.name!r}: max_budget {self.max_budget} is below base_budget "
                f"{self.base_budget}; raise max_budget"
            )
        if not self.scope_weights or any(w < 0 for w in self.scope_weights.values()):
            raise ValueError(f"profile {self.name!r}: scope weights must be non-negative")
        total = sum(self.scope_weights.values())
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"profile {self.name!r}: scope weights sum to {total:g}, not 1")
        return self

    def budget_for(self, complexity: Complexity) -> int:
        """The budget at `complexity`: base x multiplier, capped at `max_budget`."""
        return min(round(self.base_budget * COMPLEXITY_MULTIPLIERS[complexity]), self.max_budget)


BudgetProfile = AllowanceProfile
"""The old name of `AllowanceProfile` (`budget` now names the prompt plan only)."""


def _profile(
    name: str, base: int, cap: int, g: float, recent: float, patterns: float
) -> AllowanceProfile:
    weights = {"global": g, "agent_recent": recent, "agent_patterns": patterns}
    return AllowanceProfile(name=name, base_budget=base, max_budget=cap, scope_weights=weights)


DEFAULT_PROFILES: dict[str, AllowanceProfile] = {
    p.name: p
    for p in (
        _profile("specialist-narrow", 20_000, 50_000, 0.2, 0.3, 0.5),
        _profile("specialist-broad", 35_000, 75_000, 0.25, 0.25, 0.5),
        _profile("role-coordinator", 50_000, 100_000, 0.3, 0.2, 0.5),
        _profile("role-architect", 75_000, 150_000, 0.35, 0.15, 0.5),
    )
}
"""The four default profiles, smallest first."""

DEFAULT_ASSIGNMENTS: dict[str, str] = {"planner": "role-coordinator", "judge": "role-architect"}
"""Built-in assignments by role (see `collective.agents.role_of`); any other agent gets
`ProfileAssignments.default`."""


class ComplexityAssessment(BaseModel):
    """The detected complexity of a task, the reason (the deciding signals) and every signal."""

    level: Complexity
    reason: str
    signals: list[str] = Field(default_factory=list)
    """Every signal that matched, as `level: description`."""


COMPLEXITY_SIGNALS_ENV = environment.COMPLEXITY_SIGNALS_ENV


@dataclass(frozen=True)
class ComplexitySignals:
    """The signals `detect_complexity` looks for (domain data, in a TOML file)."""

    rules: dict[str, list[tuple[re.Pattern[str], str]]]
    """Per tier: (pattern, what it signals)."""
    system_nouns: re.Pattern[str]
    long_task_words: int
    short_task_words: int
    many_systems: int


def complexity_signals(path: str | None = None) -> ComplexitySignals:
    """The signals in force: the file `path` (the `complexity_signals` setting), else the packaged.

    Args:
        path: A signals file; None reads `$COLLECTIVE_COMPLEXITY_SIGNALS` ("": packaged).

    Raises:
        ConfigError: The file is missing or malformed.
    """
    return _load_signals(environment.complexity_signals_file() if path is None else path)


@functools.cache
def _load_signals(path: str) -> ComplexitySignals:
    source = Path(path) if path else resources.files("collective") / "data/complexity_signals.toml"
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
        flags = re.IGNORECASE
        return ComplexitySignals(
            rules={
                level: [(re.compile(r["pattern"], flags), r["signal"]) for r in data.get(level, [])]
                for level in ("multi-system", "complex", "simple")
            },
            system_nouns=re.compile(data["system_nouns"], flags),
            long_task_words=int(data["long_task_words"]),
            short_task_words=int(data["short_task_words"]),
            many_systems=int(data["many_systems"]),
        )
    except (OSError, KeyError, TypeError, ValueError, re.error) as exc:
        raise ConfigError(
            f"cannot read complexity signals from {source}: {exc!r}; fix the file or unset the "
            f"setting complexity_signals ({COMPLEXITY_SIGNALS_ENV}; the format is "
            "collective/data/complexity_signals.toml)"
        ) from exc


def detect_complexity(task_text: str, signals: str | None = None) -> ComplexityAssessment:
    """A task's complexity from its text: the highest tier with a signal wins; none: medium.

    Args:
        task_text: The task.
        signals: The `complexity_signals` setting (a file, "" packaged); None: the environment's.
    """
    path = environment.complexity_signals_file() if signals is None else signals
    level, reason, matched = _detect(path, task_text)
    return ComplexityAssessment(level=level, reason=reason, signals=list(matched))


@functools.lru_cache(maxsize=512)
def _detect(path: str, task_text: str) -> tuple[Complexity, str, tuple[str, ...]]:
    """Level, reason and signals for `task_text` (once per text: every call of a run asks)."""
    signals = _load_signals(path)
    found: dict[Complexity, list[str]] = {level: [] for level in COMPLEXITY_ORDER}
    for level in COMPLEXITY_ORDER:
        found[level] = [desc for rx, desc in signals.rules.get(level, []) if rx.search(task_text)]
    systems = sorted({m.lower() for m in signals.system_nouns.findall(task_text)})
    if len(systems) >= signals.many_systems:
        found["multi-system"].append(f"{len(systems)} systems named ({', '.join(systems)})")
    words = len(task_text.split())
    if words > signals.long_task_words:
        found["complex"].append(f"long task ({words} words)")
    elif 0 < words <= signals.short_task_words:
        found["simple"].append(f"short task ({words} words)")

    matched = tuple(
        f"{level}: {desc}" for level in reversed(COMPLEXITY_ORDER) for desc in found[level]
    )
    for level in ("multi-system", "complex", "simple"):
        if found[level]:
            reason = f"{level}: matched " + ", ".join(found[level])
            overruled = [lv for lv in COMPLEXITY_ORDER if lv != level and found[lv]]
            if overruled:
                reason += f" (outranks {', '.join(overruled)} signals)"
            return level, reason, matched
    return "medium", "medium: no complexity signal matched (default)", matched


class AgentBudget(BaseModel):
    """The budget of one agent for one task, after complexity and any bumps."""

    profile: AllowanceProfile
    complexity: Complexity
    """The current tier (after bumps)."""
    reason: str
    """Why this tier: the detection reason or the manual override."""
    budget: int
    """Tokens the agent may load: base x multiplier, capped at `max_budget`."""
    scope_budgets: dict[str, int]
    """The budget split by the profile's scope weights (sums to `budget`)."""
    signals: list[str] = Field(default_factory=list)
    bumps: list[str] = Field(default_factory=list)
    """One line per bump (or refused bump at the cap), oldest first."""

    @property
    def at_cap(self) -> bool:
        """True when no bump can raise the budget further."""
        return self.budget >= self.profile.max_budget or self.complexity == COMPLEXITY_ORDER[-1]


def split_budget(budget: int, weights: dict[str, float]) -> dict[str, int]:
    """Split `budget` by `weights` with largest remainders, so the parts sum exactly to it."""
    total = sum(weights.values()) or 1.0
    raw = {scope: budget * w / total for scope, w in weights.items()}
    parts = {scope: int(v) for scope, v in raw.items()}
    short = budget - sum(parts.values())
    for scope in sorted(raw, key=lambda s: (parts[s] - raw[s], s))[:short]:
        parts[scope] += 1
    return parts


def resolve_budget(
    profile: AllowanceProfile,
    task_text: str,
    override: Complexity | None = None,
    *,
    signals_file: str | None = None,
) -> AgentBudget:
    """The budget of an agent with `profile` for `task_text` (or at the tier `override`).

    `signals_file` is the `complexity_signals` setting (None: the environment's).
    """
    if override is not None:
        if override not in COMPLEXITY_MULTIPLIERS:
            raise ConfigError(
                f"unknown complexity {override!r}; use one of {', '.join(COMPLEXITY_ORDER)}"
            )
        level: Complexity = override
        reason, signals = f"{override}: manual override", []
    else:
        found = detect_complexity(task_text, signals_file)
        level, reason, signals = found.level, found.reason, found.signals
    budget = profile.budget_for(level)
    if budget < round(profile.base_budget * COMPLEXITY_MULTIPLIERS[level]):
        reason += f"; capped at max_budget {profile.max_budget}"
    return AgentBudget(
        profile=profile,
        complexity=level,
        reason=reason,
        budget=budget,
        scope_budgets=split_budget(budget, profile.scope_weights),
        signals=signals,
    )


def bump(agent_budget: AgentBudget) -> AgentBudget:
    """The budget one tier up (at the cap: the same tier), the bump (or refusal) recorded."""
    current = agent_budget.complexity
    if agent_budget.at_cap:
        limit = "top tier" if current == COMPLEXITY_ORDER[-1] else "max_budget cap"
        note = f"no bump: {current} (budget {agent_budget.budget}) is already at the {limit}"
        return agent_budget.model_copy(update={"bumps": [*agent_budget.bumps, note]})
    nxt = COMPLEXITY_ORDER[COMPLEXITY_ORDER.index(current) + 1]
    profile = agent_budget.profile
    budget = profile.budget_for(nxt)
    note = f"bumped {current} -> {nxt}: budget {agent_budget.budget} -> {budget}"
    if budget == profile.max_budget:
        note += " (cap)"
    return agent_budget.model_copy(
        update={
            "complexity": nxt,
            "budget": budget,
            "scope_budgets": split_budget(budget, profile.scope_weights),
            "bumps": [*agent_budget.bumps, note],
        }
    )


class ProfileAssignments(BaseModel):
    """Which profile each agent (or role) uses; `default` for the others; the known profiles."""

    assignments: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_ASSIGNMENTS))
    default: str = "specialist-broad"
    profiles: dict[str, AllowanceProfile] = Field(default_factory=lambda: dict(DEFAULT_PROFILES))

    @model_validator(mode="after")
    def _check(self) -> ProfileAssignments:
        for agent, name in [*self.assignments.items(), ("(default)", self.default)]:
            if name not in self.profiles:
                raise ValueError(
                    f"agent {agent!r} is assigned unknown profile {name!r}; "
                    f"known profiles: {', '.join(self.profiles)}"
                )
        return self

    @classmethod
    def from_config(cls, data: dict[str, Any] | None) -> ProfileAssignments:
        """Build assignments from config.

        Accepts either a flat `{agent: profile}` mapping or
        `{"assignments": {...}, "default": "...", "profiles": {name: {...}}}`; profiles given in
        config are added to (or replace) the defaults, and the built-in assignments apply to
        agents the config does not list.

        Raises:
            ConfigError: On an unknown profile name or an invalid profile.
        """
        data = dict(data or {})
        structured = {"assignments", "default", "profiles"} & data.keys()
        if not structured:
            data = {"assignments": data}
        try:
            profiles = dict(DEFAULT_PROFILES)
            for name, spec in (data.get("profiles") or {}).items():
                spec = spec if isinstance(spec, AllowanceProfile) else {"name": name, **spec}
                profiles[name] = AllowanceProfile.model_validate(spec)
            return cls(
                assignments={**DEFAULT_ASSIGNMENTS, **(data.get("assignments") or {})},
                default=data.get("default", "specialist-broad"),
                profiles=profiles,
            )
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ConfigError(f"invalid budget profile configuration: {exc}") from exc

    @classmethod
    def from_settings(cls, settings: Any) -> ProfileAssignments:
        """Assignments from a run's `agent_profiles` and `allowance_profiles` settings.

        A run reads them once, when its `CouncilContext` is made (`memory_profiles`).
        """
        assignments, profiles = dict(settings.agent_profiles), dict(settings.allowance_profiles)
        return cls.from_config({"assignments": assignments, "profiles": profiles})

    def profile_for(self, agent: str) -> AllowanceProfile:
        """The profile of `agent`: its own assignment, else its role's, else the default.

        Agents are named as in `collective.agents` (`plan`, `specialist-2`, `judge`); a role
        name (`planner`, `specialist`) assigns every agent of that role.
        """
        name = self.assignments.get(agent) or self.assignments.get(role_of(agent))
        return self.profiles[name or self.default]
