"""`collective budget`: usage analytics over the budget monitor's usage log.

Mount with `cli_app.add_typer(budget.app, name="budget")`. Heavy imports (pydantic models, rich)
happen inside the command so that `collective --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from collective.budget.monitor import Recommendation, UsageReport

__all__ = ["app", "apply_line", "report"]

app = typer.Typer(help="Token budget usage: per-agent reports and profile recommendations.")


@app.callback()
def _budget() -> None:
    """Token budget usage: per-agent reports and profile recommendations."""


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
) -> None:
    """Usage per agent and profile, exceedance rates and recommendations."""
    from collective.budget.monitor import UsageLog, analyze

    usage_log = UsageLog(log) if log is not None else UsageLog.default()
    records, corrupt = usage_log.read(since_days=since)
    result = analyze(
        records,
        upgrade_threshold=upgrade_threshold,
        min_calls=min_calls,
        corrupt_lines=corrupt,
        since_days=since,
    )
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    _print(result, str(usage_log.path))


def _print(result: UsageReport, path: str) -> None:
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
    recs = Table(title="Recommendations")
    for column in ("agent", "change", "apply", "confidence", "reason"):
        recs.add_column(column, justify="right" if column == "confidence" else "left")
    for r in result.recommendations:
        recs.add_row(
            r.agent, f"{r.kind} ({r.profile})", apply_line(r), f"{r.confidence:.2f}", r.reason
        )
    console.print(recs)
    moves = {r.agent: r.suggested_profile for r in result.recommendations if r.suggested_profile}
    if moves:
        import json

        lines = "\n".join(f'{agent} = "{profile}"' for agent, profile in moves.items())
        console.print(
            "To apply the profile changes, add to your config file (collective.toml):\n"
            f"[agent_profiles]\n{lines}\n"
            f"or for one shell: export COLLECTIVE_AGENT_PROFILES='{json.dumps(moves)}'",
            markup=False,
            highlight=False,
        )


def apply_line(rec: Recommendation) -> str:
    """What the user changes to follow `rec`: a config line, or what to do instead."""
    if rec.suggested_profile:
        return f'[agent_profiles] {rec.agent} = "{rec.suggested_profile}"'
    if rec.suggested_weights is not None:
        weights = ", ".join(f"{s} {w:.2f}" for s, w in rec.suggested_weights.items())
        return f"scope weights {weights} (no config key for weights yet)"
    return (
        f"{rec.agent} is at the largest profile: raise its model's budgets "
        f"(budgets.<role> in the config) or its output cap"
    )
