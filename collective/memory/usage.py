"""The memory usage monitor, the usage log and usage analytics.

`BudgetMonitor` follows one model call: every `load(scope, tokens)` adds to the tokens loaded
into that memory scope and, measured against the budget the call was given, emits an event the
first time usage reaches 75% (info), 90% (warning) and passes 100% (error). Passing 100% also
bumps the call to the next complexity tier (soft enforcement, see `allowances.bump`). Each
threshold fires at most once per call, so a call that keeps loading does not spam events.

`finish()` turns the call into a `UsageRecord`; `UsageLog` appends one JSON line per record. An
append is one `os.write` of the whole line on an `O_APPEND` descriptor under an exclusive
`fcntl.flock`, so concurrent writers (threads or processes) never interleave or tear lines.

`analyze` reads records back into per-agent and per-profile usage with exceedance rates and
recommendations (upgrade, downgrade, adjust scope weights), each with a reason and a confidence.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from collective import environment
from collective.budget.report import BudgetReport
from collective.memory.allowances import (
    DEFAULT_PROFILES,
    AgentBudget,
    AllowanceProfile,
    Complexity,
    bump,
)

try:  # POSIX only; elsewhere O_APPEND single writes are the only protection.
    import fcntl
except ImportError:  # pragma: no cover - not on the supported platforms
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_USAGE_LOG",
    "THRESHOLDS",
    "AgentUsage",
    "BudgetEvent",
    "BudgetMonitor",
    "ProfileUsage",
    "Recommendation",
    "UsageLog",
    "UsageRecord",
    "UsageReport",
    "analyze",
    "record_model_call",
    "scope_for_section",
]

EventLevel = Literal["info", "warning", "error"]

THRESHOLDS: tuple[tuple[float, EventLevel], ...] = (
    (0.75, "info"),
    (0.90, "warning"),
    (1.0, "error"),
)
"""Usage fractions of the call's budget and the event each emits (error: strictly above 100%)."""

DEFAULT_USAGE_LOG = environment.USAGE_LOG_PATH
"""Where the usage log lives unless `COLLECTIVE_USAGE_LOG` says otherwise."""


@dataclass(frozen=True)
class BudgetEvent:
    """A threshold crossed during one call (`info` 75%, `warning` 90%, `error` over 100%)."""

    agent: str
    level: EventLevel
    threshold: float
    scope: str
    """The scope whose load crossed it."""
    loaded: int
    budget: int
    """The budget the call started with."""
    usage_pct: float
    message: str


class UsageRecord(BaseModel):
    """One model call's memory usage: one line of the usage log.

    `complexity` and `allocated` are the tier and budget the call started at, `final_*` after
    any bumps; `loaded` counts every scope, `usage_pct` is it as a percentage of `allocated`.
    """

    timestamp: str
    """When the call finished (ISO 8601, UTC)."""
    agent: str
    profile: str
    complexity: Complexity
    final_complexity: Complexity
    allocated: int
    final_budget: int
    loaded: int
    usage_pct: float
    scopes: dict[str, int]
    """Tokens loaded per memory scope."""
    scope_budgets: dict[str, int]
    exceeded: bool
    warnings: list[str] = Field(default_factory=list)
    bumps: list[str] = Field(default_factory=list)

    @property
    def when(self) -> datetime:
        """`timestamp` as an aware datetime."""
        when = datetime.fromisoformat(self.timestamp)
        return when if when.tzinfo else when.replace(tzinfo=UTC)


class BudgetMonitor:
    """Tracks the tokens one call loads per memory scope against the agent's budget.

    Args:
        agent: The agent making the call.
        agent_budget: Its budget for the task (from `resolve_budget`).
        on_event: Called with every event as it is emitted (e.g. to log it).
    """

    def __init__(
        self,
        agent: str,
        agent_budget: AgentBudget,
        on_event: Callable[[BudgetEvent], None] | None = None,
    ) -> None:
        self.agent = agent
        self.initial_budget = agent_budget
        self.agent_budget = agent_budget
        """The current budget: the initial one, or its bumped successor."""
        self.on_event = on_event
        self.scopes: dict[str, int] = dict.fromkeys(agent_budget.scope_budgets, 0)
        self.events: list[BudgetEvent] = []
        self._fired: set[float] = set()
        self._record: UsageRecord | None = None

    @property
    def loaded(self) -> int:
        """Tokens loaded so far, all scopes together."""
        return sum(self.scopes.values())

    @property
    def usage_pct(self) -> float:
        """Tokens loaded as a percentage of the starting budget."""
        return 100.0 * self.loaded / self.initial_budget.budget

    def load(self, scope: str, tokens: int) -> list[BudgetEvent]:
        """Record `tokens` loaded into `scope`; returns the events this load emitted.

        Raises:
            ValueError: On a negative count.
            RuntimeError: After `finish`.
        """
        if tokens < 0:
            raise ValueError(f"tokens loaded must be >= 0, got {tokens}")
        if self._record is not None:
            raise RuntimeError("this call is finished; start a new BudgetMonitor for the next one")
        self.scopes[scope] = self.scopes.get(scope, 0) + tokens
        allocated, loaded = self.initial_budget.budget, self.loaded
        crossed = [
            (threshold, level)
            for threshold, level in THRESHOLDS
            if threshold not in self._fired
            and (loaded > allocated if level == "error" else loaded >= threshold * allocated)
        ]
        self._fired.update(threshold for threshold, _ in crossed)
        before = self.agent_budget
        # Soft enforcement: bump while the load exceeds the current budget and a tier is left;
        # later overruns in the same call bump silently (the error already fired once).
        while loaded > self.agent_budget.budget and not self.agent_budget.at_cap:
            self.agent_budget = bump(self.agent_budget)
        error = any(level == "error" for _, level in crossed)
        if error and self.agent_budget is before and loaded > before.budget:
            self.agent_budget = bump(before)  # at the cap: records the refused bump
        emitted = [self._event(level, threshold, scope, before) for threshold, level in crossed]
        for event in emitted:
            self.events.append(event)
            if self.on_event is not None:
                self.on_event(event)
        return emitted

    def _event(
        self, level: EventLevel, threshold: float, scope: str, before: AgentBudget
    ) -> BudgetEvent:
        allocated, loaded = self.initial_budget.budget, self.loaded
        pct = 100.0 * loaded / allocated
        what = {"info": "reached 75%", "warning": "reached 90%", "error": "exceeded"}[level]
        message = (
            f"{self.agent}: {what} of its {allocated}-token budget ({loaded} loaded, {pct:.1f}%)"
        )
        if level == "error":
            now = self.agent_budget
            message += (
                f"; bumped {before.complexity} -> {now.complexity} (budget {now.budget})"
                if now.complexity != before.complexity
                else f"; no bump: already at the cap (budget {now.budget})"
            )
        return BudgetEvent(self.agent, level, threshold, scope, loaded, allocated, pct, message)

    def finish(self, timestamp: datetime | None = None) -> UsageRecord:
        """Close the call and return its usage record (the same record if called again)."""
        if self._record is not None:
            return self._record
        start, end = self.initial_budget, self.agent_budget
        warnings = [e.message for e in self.events if e.level != "info"]
        for scope, used in self.scopes.items():
            share = start.scope_budgets.get(scope, 0)
            if used > share:
                warnings.append(f"scope {scope} loaded {used} of its {share}-token share")
        self._record = UsageRecord(
            timestamp=(timestamp or datetime.now(UTC)).isoformat(),
            agent=self.agent,
            profile=start.profile.name,
            complexity=start.complexity,
            final_complexity=end.complexity,
            allocated=start.budget,
            final_budget=end.budget,
            loaded=self.loaded,
            usage_pct=round(self.usage_pct, 2),
            scopes=dict(self.scopes),
            scope_budgets=dict(start.scope_budgets),
            exceeded=self.loaded > start.budget,
            warnings=warnings,
            bumps=end.bumps[len(start.bumps) :],
        )
        return self._record


class UsageLog:
    """An append-only JSON-lines log of usage records, safe for concurrent writers.

    Args:
        path: The log file; its directory is created on the first append.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @classmethod
    def default(cls) -> UsageLog:
        """The log at `$COLLECTIVE_USAGE_LOG`, else `.collective/usage.jsonl`."""
        return cls(environment.usage_log_path())

    def append(self, record: UsageRecord) -> None:
        """Append one record as one line.

        The line is written with a single `os.write` on an `O_APPEND` descriptor while holding
        an exclusive `flock`: the kernel places each append at the end atomically, and the lock
        also covers the rare short write that a retry has to finish.
        """
        data = (record.model_dump_json() + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)  # closing releases the lock

    def read(self, since_days: float | None = None) -> tuple[list[UsageRecord], int]:
        """Read the records, oldest first.

        Args:
            since_days: Keep only records from the last this many days.

        Returns:
            The records and the number of corrupt lines skipped (blank lines are not counted).
        """
        if not self.path.exists():
            return [], 0
        cutoff = None if since_days is None else datetime.now(UTC) - timedelta(days=since_days)
        records, corrupt = [], 0
        with self.path.open("rb") as handle:
            for raw in handle:
                if not raw.strip():
                    continue
                try:
                    record = UsageRecord.model_validate_json(raw)
                    when = record.when
                except (ValidationError, ValueError):
                    corrupt += 1
                    continue
                if cutoff is None or when >= cutoff:
                    records.append(record)
        return records, corrupt


@functools.cache
def scope_for_section(section: str) -> str | None:
    """The memory scope a prompt section's tokens count against (None: not loaded content).

    The mapping `record_model_call` uses:

    * conversation summary (and any memory/history section) -> `agent_recent`;
    * KB chunks and evidence (anything retrieved) -> `global`;
    * system prompt, task framing, proposals, planning context, tools and every other section
      -> `agent_patterns` (the agent's role and task material);
    * safety margin -> None (reserved space, nothing loaded).
    """
    name = section.lower()
    if "safety" in name or "margin" in name:
        return None
    if any(k in name for k in ("conversation", "summary", "memory", "history")):
        return "agent_recent"
    if any(k in name for k in ("kb", "evidence", "knowledge", "retriev")):
        return "global"
    return "agent_patterns"


def record_model_call(
    log: UsageLog | None,
    agent: str,
    agent_budget: AgentBudget,
    report: BudgetReport,
    on_event: Callable[[BudgetEvent], None] | None = None,
) -> UsageRecord:
    """Monitor one call from its budget report and append its usage record to `log`.

    Each section's tokens load into its scope; `on_event` hears each threshold event; a None
    `log` writes nothing. Returns the record.
    """
    monitor = BudgetMonitor(agent, agent_budget, on_event=on_event)
    for section in report.sections:
        scope = scope_for_section(section.name)
        if scope is not None:
            monitor.load(scope, section.used)
    record = monitor.finish()
    if log is not None:
        log.append(record)
    return record


class AgentUsage(BaseModel):
    """Usage of one agent under one profile."""

    agent: str
    profile: str
    calls: int
    mean_usage_pct: float
    p90_usage_pct: float
    max_usage_pct: float
    exceeded: int
    exceedance_rate: float
    bumped: int
    """Calls that were bumped to a higher tier."""
    mean_loaded: float
    scope_shares: dict[str, float]
    """Actual share of loaded tokens per scope."""
    scope_weights: dict[str, float]
    """The profile's weights the shares are compared with."""


class ProfileUsage(BaseModel):
    """Usage of one profile across its agents."""

    profile: str
    agents: list[str]
    calls: int
    mean_usage_pct: float
    exceedance_rate: float


class Recommendation(BaseModel):
    """A suggested profile change for `agent`, now on `profile`, with the reason in figures."""

    agent: str
    profile: str
    kind: Literal["upgrade", "downgrade", "adjust_scope_weights"]
    suggested_profile: str | None = None
    """The profile to move to (None: none exists, or a weights change)."""
    suggested_weights: dict[str, float] | None = None
    reason: str
    confidence: float
    """0-1: the strength of the signal scaled by the sample size n/(n+10)."""


class UsageReport(BaseModel):
    """What `collective allowances report` shows."""

    total_calls: int
    corrupt_lines: int = 0
    since_days: float | None = None
    agents: list[AgentUsage]
    profiles: list[ProfileUsage]
    recommendations: list[Recommendation]


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def _confidence(calls: int, strength: float) -> float:
    return round((calls / (calls + 10)) * max(0.0, min(1.0, strength)), 2)


def _round_weights(shares: dict[str, float]) -> dict[str, float]:
    weights = {s: round(v, 2) for s, v in shares.items()}
    top = max(weights, key=lambda s: weights[s])
    weights[top] = round(weights[top] + 1.0 - sum(weights.values()), 2)
    return weights


def analyze(
    records: Iterable[UsageRecord],
    *,
    profiles: dict[str, AllowanceProfile] | None = None,
    upgrade_threshold: float = 0.2,
    downgrade_below_pct: float = 50.0,
    drift_threshold: float = 0.15,
    min_calls: int = 5,
    corrupt_lines: int = 0,
    since_days: float | None = None,
) -> UsageReport:
    """Summarise usage records and recommend profile changes.

    Args:
        records: Usage records (from `UsageLog.read`).
        profiles: Known profiles by name, to find the next larger or smaller one.
        upgrade_threshold: Recommend an upgrade when an agent exceeds its budget in more than
            this share of its calls.
        downgrade_below_pct: Recommend a downgrade when mean usage stays below this percentage,
            no call exceeded, and the next smaller profile would have held at least
            `1 - upgrade_threshold / 2` of the calls.
        drift_threshold: Recommend new scope weights when an actual scope share differs from
            its weight by more than this.
        min_calls: Make no recommendation for an agent with fewer calls.
        corrupt_lines: Corrupt log lines skipped while reading (reported as is).
        since_days: The window the records cover (reported as is).

    Returns:
        The report.
    """
    profiles = profiles if profiles is not None else DEFAULT_PROFILES
    ladder = sorted(profiles.values(), key=lambda p: (p.base_budget, p.max_budget, p.name))
    groups: dict[tuple[str, str], list[UsageRecord]] = {}
    for record in records:
        groups.setdefault((record.agent, record.profile), []).append(record)
    agents, recommendations = [], []
    for (agent, profile_name), recs in sorted(groups.items()):
        profile = profiles.get(profile_name)
        row, shares, weights = _agent_usage(agent, profile_name, recs, profile)
        agents.append(row)
        if row.calls >= min_calls:
            recommendations += _recommend(
                row, recs, profile, ladder, upgrade_threshold, downgrade_below_pct
            )
            recommendations += _drift(row, shares, weights, drift_threshold)
    return UsageReport(
        total_calls=sum(len(r) for r in groups.values()),
        corrupt_lines=corrupt_lines,
        since_days=since_days,
        agents=agents,
        profiles=_profile_rows(groups),
        recommendations=recommendations,
    )


def _agent_usage(
    agent: str, profile_name: str, recs: list[UsageRecord], profile: AllowanceProfile | None
) -> tuple[AgentUsage, dict[str, float], dict[str, float]]:
    """One agent's usage under one profile, its actual scope shares and the profile's weights.

    The shares are empty when nothing was loaded (no drift to speak of).
    """
    n = len(recs)
    usage = [r.usage_pct for r in recs]
    exceeded = sum(r.exceeded for r in recs)
    total_loaded = sum(r.loaded for r in recs)
    if profile is not None:
        weights = dict(profile.scope_weights)
    else:  # an unknown profile: its weights as the records allocated them
        shares = recs[-1].scope_budgets
        weights = {s: v / (sum(shares.values()) or 1) for s, v in shares.items()}
    scopes = sorted({*weights, *(s for r in recs for s in r.scopes)})
    scope_shares = {
        s: (sum(r.scopes.get(s, 0) for r in recs) / total_loaded if total_loaded else 0.0)
        for s in scopes
    }
    row = AgentUsage(
        agent=agent,
        profile=profile_name,
        calls=n,
        mean_usage_pct=round(statistics.fmean(usage), 2),
        p90_usage_pct=round(_p90(usage), 2),
        max_usage_pct=round(max(usage), 2),
        exceeded=exceeded,
        exceedance_rate=round(exceeded / n, 4),
        bumped=sum(bool(r.bumps) for r in recs),
        mean_loaded=round(total_loaded / n, 1),
        scope_shares={s: round(v, 4) for s, v in scope_shares.items()},
        scope_weights={s: weights.get(s, 0.0) for s in scopes},
    )
    return row, (scope_shares if total_loaded else {}), weights


def _drift(
    row: AgentUsage, shares: dict[str, float], weights: dict[str, float], drift_threshold: float
) -> list[Recommendation]:
    """New scope weights when an actual scope share strays from its weight past the threshold."""
    drift = {s: shares[s] - weights.get(s, 0.0) for s in shares}
    worst = max(drift, key=lambda s: abs(drift[s])) if drift else None
    if worst is None or abs(drift[worst]) <= drift_threshold:
        return []
    listed = ", ".join(
        f"{s} {shares[s]:.0%} vs weight {weights.get(s, 0.0):.0%}"
        for s in shares
        if abs(drift[s]) > drift_threshold
    )
    return [
        Recommendation(
            agent=row.agent,
            profile=row.profile,
            kind="adjust_scope_weights",
            suggested_weights=_round_weights(shares),
            reason=f"actual scope usage drifts from the weights: {listed}",
            confidence=_confidence(row.calls, abs(drift[worst]) / (2 * drift_threshold)),
        )
    ]


def _profile_rows(groups: dict[tuple[str, str], list[UsageRecord]]) -> list[ProfileUsage]:
    """Usage per profile across its agents."""
    by_profile: dict[str, list[UsageRecord]] = {}
    for (_, profile_name), recs in groups.items():
        by_profile.setdefault(profile_name, []).extend(recs)
    return [
        ProfileUsage(
            profile=name,
            agents=sorted({r.agent for r in recs}),
            calls=len(recs),
            mean_usage_pct=round(statistics.fmean(r.usage_pct for r in recs), 2),
            exceedance_rate=round(sum(r.exceeded for r in recs) / len(recs), 4),
        )
        for name, recs in sorted(by_profile.items())
    ]


def _recommend(
    row: AgentUsage,
    recs: list[UsageRecord],
    profile: AllowanceProfile | None,
    ladder: list[AllowanceProfile],
    upgrade_threshold: float,
    downgrade_below_pct: float,
) -> list[Recommendation]:
    n, rate = row.calls, row.exceedance_rate
    index = next((i for i, p in enumerate(ladder) if profile and p.name == profile.name), None)
    if rate > upgrade_threshold:
        larger = ladder[index + 1] if index is not None and index + 1 < len(ladder) else None
        reason = (
            f"over budget in {row.exceeded} of {n} calls ({rate:.0%} > {upgrade_threshold:.0%})"
        )
        if larger is None:
            reason += "; no larger profile exists: raise this profile's base and max budgets"
        else:
            reason += f"; {larger.name} has base {larger.base_budget}, max {larger.max_budget}"
        return [
            Recommendation(
                agent=row.agent,
                profile=row.profile,
                kind="upgrade",
                suggested_profile=larger.name if larger else None,
                reason=reason,
                confidence=_confidence(n, rate / (2 * upgrade_threshold)),
            )
        ]
    if row.exceeded == 0 and row.mean_usage_pct < downgrade_below_pct and index:
        smaller = ladder[index - 1]
        would_exceed = sum(r.loaded > smaller.budget_for(r.complexity) for r in recs)
        if would_exceed / n <= upgrade_threshold / 2:
            return [
                Recommendation(
                    agent=row.agent,
                    profile=row.profile,
                    kind="downgrade",
                    suggested_profile=smaller.name,
                    reason=(
                        f"mean usage {row.mean_usage_pct:.1f}% < {downgrade_below_pct:.0f}% "
                        f"with no call over budget; {smaller.name} would have held "
                        f"{n - would_exceed} of {n} calls"
                    ),
                    confidence=_confidence(
                        n, 1 - row.mean_usage_pct / downgrade_below_pct - would_exceed / n
                    ),
                )
            ]
    return []
