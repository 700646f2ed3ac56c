"""`collective allowances`: how each agent used its memory allowance, from the usage log.

Mount with `cli_app.add_typer(budget.app, name="allowances")` (and, hidden, under its old name
`budget`, which says it was renamed: a *budget* is the prompt plan only). Heavy imports
(pydantic models, rich) happen inside the command so that `collective --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from collective.commands.options import ConfigOption

if TYPE_CHECKING:
    from collective.memory.allowances import AllowanceProfile
    from collective.memory.usage import Recommendation, UsageReport

__all__ = ["app", "config_changes", "report"]

app = typer.Typer(help="Memory allowance usage: per-agent reports and profile recommendations.")


@app.callback()
def _allowances(ctx: typer.Context) -> None:
    """Memory allowance usage: per-agent reports and profile recommendations."""
    if ctx.info_name == "budget":
        typer.echo(
            "note: `collective budget` is now `collective allowances` (memory allowances; "
            "budget names the prompt plan)",
            err=True,
        )


@app.command()
def report(
    since: Annotated[
        float | None, typer.Option("--since", min=0, help="Only calls from the last DAYS days.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    log: Annotated[
        Path | None,
        typer.Option(
            "--log", help="Usage log (default: $COLLECTIVE_USAGE_LOG or .collective/usage.jsonl)."
        ),
    ] = None,
    upgrade_threshold: Annotated[
        float,
        typer.Option(min=0, max=1, help="Upgrade when over budget in more than this share."),
    ] = 0.2,
    min_calls: Annotated[
        int, typer.Option(min=1, help="No recommendation for agents with fewer calls.")
    ] = 5,
    config: ConfigOption = None,
) -> None:
    """Usage per agent and profile, exceedance rates and recommendations."""
    from collective.config import load_config
    from collective.memory.usage import UsageLog, analyze

    profiles = load_config(config).config.council_context().memory_profiles.profiles
    usage_log = UsageLog(log) if log is not None else UsageLog.default()
    records, corrupt = usage_log.read(since_days=since)
    result = analyze(
        records,
        profiles=profiles,
        upgrade_threshold=upgrade_threshold,
        min_calls=min_calls,
        corrupt_lines=corrupt,
        since_days=since,
    )
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    _print(result, str(usage_log.path), profiles)


def _print(result: UsageReport, path: str, known: dict[str, AllowanceProfile]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    window = f" in the last {result.since_days:g} days" if result.since_days is not None else ""
    console.print(f"[bold]{result.total_calls}[/] model calls{window} from {path}")
    if result.corrupt_lines:
        console.print(f"[yellow]{result.corrupt_lines} corrupt line(s) skipped[/]")
    if not result.total_calls:
        console.print("No usage recorded yet: run `collective ask` first.")
        return

    agents = Table(title="Usage per agent")
    for column in ("agent", "profile", "calls", "mean %", "p90 %", "max %", "exceeded", "bumped"):
        agents.add_column(column, justify="left" if column in ("agent", "profile") else "right")
    agents.add_column("scope shares (weights)")
    for a in result.agents:
        shares = ", ".join(
            f"{s} {a.scope_shares[s]:.0%} ({a.scope_weights.get(s, 0):.0%})" for s in a.scope_shares
        )
        agents.add_row(
            a.agent,
            a.profile,
            str(a.calls),
            f"{a.mean_usage_pct:.1f}",
            f"{a.p90_usage_pct:.1f}",
            f"{a.max_usage_pct:.1f}",
            f"{a.exceeded} ({a.exceedance_rate:.0%})",
            str(a.bumped),
            shares,
        )
    console.print(agents)

    profiles = Table(title="Usage per profile")
    for column in ("profile", "agents", "calls", "mean %", "exceedance"):
        profiles.add_column(column, justify="left" if column in ("profile", "agents") else "right")
    for p in result.profiles:
        profiles.add_row(
            p.profile,
            ", ".join(p.agents),
            str(p.calls),
            f"{p.mean_usage_pct:.1f}",
            f"{p.exceedance_rate:.0%}",
        )
    console.print(profiles)

    if not result.recommendations:
        console.print("No recommendations: every profile fits its agents' usage.")
        return
    moves, new_profiles = config_changes(result.recommendations, known)
    recs = Table(title="Recommendations")
    for column in ("agent", "change", "apply", "confidence", "reason"):
        recs.add_column(column, justify="right" if column == "confidence" else "left")
    for r in result.recommendations:
        profile = moves.get(r.agent)
        if profile is None and r.suggested_weights is not None:
            apply = f"give profile {r.profile} these scope_weights in [allowance_profiles]"
        elif profile is None:
            apply = "raise the profile's budgets in [allowance_profiles]"
        else:
            apply = f'[agent_profiles] {r.agent} = "{profile}"'
            if profile in new_profiles:
                apply += f" with [allowance_profiles.{profile}] below"
        recs.add_row(r.agent, f"{r.kind} ({r.profile})", apply, f"{r.confidence:.2f}", r.reason)
    console.print(recs)
    if moves:
        import json

        extra = json.dumps(new_profiles)
        console.print(
            "To apply, add to your config file (collective.toml):\n"
            f"{_toml(moves, new_profiles)}\n"
            "or for one shell: export "
            f"COLLECTIVE_AGENT_PROFILES='{json.dumps(moves)}'"
            + (f" COLLECTIVE_ALLOWANCE_PROFILES='{extra}'" if new_profiles else ""),
            markup=False,
            highlight=False,
        )


def config_changes(
    recommendations: list[Recommendation], known: dict[str, AllowanceProfile]
) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """The config that follows `recommendations`: agent -> profile, and new profiles by name.

    A profile change assigns the suggested profile; new scope weights become a profile of the
    agent's own (`{agent}-weights`, the base and cap of the profile it ends up with), since
    weights belong to a profile. An upgrade with no larger profile changes nothing here.
    """
    moves: dict[str, str] = {}
    new: dict[str, dict[str, Any]] = {}
    for rec in recommendations:
        if rec.suggested_profile:
            moves[rec.agent] = rec.suggested_profile
    for rec in recommendations:
        base = known.get(moves.get(rec.agent, rec.profile))
        if rec.suggested_weights is None or base is None:
            continue
        name = f"{rec.agent}-weights"
        new[name] = {
            "base_budget": base.base_budget,
            "max_budget": base.max_budget,
            "scope_weights": dict(rec.suggested_weights),
        }
        moves[rec.agent] = name
    return moves, new


def _toml(moves: dict[str, str], profiles: dict[str, dict[str, Any]]) -> str:
    lines = ["[agent_profiles]", *(f'{agent} = "{name}"' for agent, name in moves.items())]
    for name, spec in profiles.items():
        weights = ", ".join(f"{s} = {w:g}" for s, w in spec["scope_weights"].items())
        lines += [
            "",
            f"[allowance_profiles.{name}]",
            f"base_budget = {spec['base_budget']}",
            f"max_budget = {spec['max_budget']}",
            f"scope_weights = {{ {weights} }}",
        ]
    return "\n".join(lines) + "\n"
