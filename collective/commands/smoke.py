"""`collective smoke`: check a deployment the way an operator would.

For every configured server: it answers and is healthy; the configured model exists
(`Backend.model_check`: llama-server `/props`, Ollama `/api/tags`, `/v1/models`). For every
role: the real context versus the role's budget preset, with a loud warning when a slot is
smaller than the preset (a 32K specialist preset on a 4K slot is scaled to an eighth). For
every server: its KV pool (slots, pool size, unified or not), with a warning when the K
specialists on it need more than the pool at once (admission control then makes them take
turns). Then one council run that
must finish with no HTTP 400/500, every specialist answering, and a budget report for every
model call that fits its context. Exit code 0 only when nothing failed (`--strict`: and
nothing warned).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from collective import agents
from collective.commands.options import ConfigOption

if TYPE_CHECKING:
    from collective.config import CollectiveConfig
    from collective.models.base import Backend

__all__ = ["Check", "run_checks", "smoke"]

DEFAULT_QUESTION = "Which filament should I use for a part that sits in a hot car, and why?"

Status = Literal["pass", "warn", "fail"]


@dataclass
class Check:
    """One line of the smoke table."""

    check: str
    target: str
    status: Status
    detail: str


async def _model_exists(backend: Backend) -> Check:
    """The configured model is really served."""
    check = await backend.model_check()
    return Check("model", backend.spec, "pass" if check.ok else "fail", check.detail)


async def _context(config: CollectiveConfig, role: str, backend: Backend) -> Check:
    """The role's real context against its preset; smaller is a loud warning."""
    from collective.errors import CollectiveError

    preset = config.budget_plan(role)
    target = f"{role} @ {backend.spec}"
    try:
        n_ctx = await backend.context_window()
    except CollectiveError as exc:
        return Check("context", target, "fail", str(exc))
    if n_ctx >= preset.n_ctx:
        return Check(
            "context", target, "pass", f"n_ctx {n_ctx:,} >= {preset.name} preset {preset.n_ctx:,}"
        )
    scaled = preset.fit_to_context(n_ctx)
    kb = scaled.sections.get("kb_chunks")
    kb_note = (
        f"; KB chunks get {kb:,} tokens instead of {preset.sections['kb_chunks']:,}"
        if kb is not None
        else ""
    )
    fix = backend.context_fix
    return Check(
        "context",
        target,
        "warn",
        f"SLOT SMALLER THAN PRESET: n_ctx {n_ctx:,} < {preset.name} preset {preset.n_ctx:,}; "
        f"every budget is scaled x{n_ctx / preset.n_ctx:.3f}{kb_note}.{fix}",
    )


async def _pool(config: CollectiveConfig, backend: Backend, members: int) -> Check:
    """The server's KV pool; a warning when the specialists on it cannot all run at once."""
    from collective.errors import CollectiveError

    try:
        pool = await backend.pool()
    except CollectiveError as exc:
        return Check("pool", backend.spec, "fail", str(exc))
    if pool is None:
        return Check("pool", backend.spec, "pass", "no pool reported: calls are sent at once")
    detail = pool.describe()
    if not members:
        return Check("pool", backend.spec, "pass", detail)
    plan = config.budget_plan("specialist").fit_to_context(pool.slot_ctx)
    caps = [config.council_context().output_caps.get("specialist"), backend.output_cap]
    per_call = plan.prompt_budget + min([plan.output_budget, *(c for c in caps if c)])
    need = members * per_call
    if need <= pool.tokens and members <= pool.slots:
        return Check(
            "pool", backend.spec, "pass", f"{detail}; {members} x {per_call:,} = {need:,} fit"
        )
    return Check(
        "pool",
        backend.spec,
        "warn",
        f"POOL SMALLER THAN THE COUNCIL: {detail}; {members} specialists x {per_call:,} tokens = "
        f"{need:,}. Admission control makes them take turns (no HTTP 500), so they do not all "
        f"run at once. For parallel specialists give each its own slot: llama-server -np "
        f"{members} -c $(({pool.slot_ctx}*{members})) and the spec ...?kv=per-slot.",
    )


async def _council(config: CollectiveConfig, question: str) -> list[Check]:
    """One council run on a throwaway thread (in memory: the user's threads stay untouched)."""
    from dataclasses import replace

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from collective.errors import CollectiveError
    from collective.graph import build_graph
    from collective.graph.state import answered as members_that_answered
    from collective.session import CouncilSession, run_council

    ctx = replace(config.council_context(), usage_log=None)
    session = CouncilSession(
        build_graph(checkpointer=InMemorySaver(), store=InMemoryStore()),
        None,
        config,
    )
    target = f"k={ctx.k}"
    try:
        result = await run_council(session, question, "smoke", context=ctx)
    except CollectiveError as exc:
        return [Check("council run", target, "fail", f"{type(exc).__name__}: {exc}")]
    checks = [Check("council run", target, "pass", f"verdict of {len(result['answer'])} chars")]
    if not result["answer"].strip():
        checks[0] = Check("council run", target, "warn", "the judge returned an empty verdict")
    for proposal in result["proposals"]:
        if proposal.get("error"):
            checks.append(Check("specialist", proposal["member"], "fail", proposal["error"]))
    answered = {p["member"] for p in members_that_answered(result["proposals"])}
    expected = {agents.PLAN, agents.JUDGE, *(set(agents.members(ctx.k)) & answered)}
    reports = {b["node"]: b for b in result["budgets"]}
    missing = sorted(expected - set(reports))
    over = [n for n, b in reports.items() if not b["fits"]]
    if missing or over:
        why = (f"missing for {', '.join(missing)}" if missing else "") + (
            f" over n_ctx for {', '.join(over)}" if over else ""
        )
        checks.append(Check("budget reports", target, "fail", why.strip()))
    else:
        checks.append(
            Check(
                "budget reports",
                target,
                "pass",
                f"{len(reports)} reports, each prompt + output <= n_ctx",
            )
        )
    checks += _prefix_reuse(ctx, reports)
    for note in result.get("notes") or []:
        checks.append(Check("backend note", target, "warn", str(note)))
    return checks


def _prefix_reuse(ctx: Any, reports: Mapping[str, Mapping[str, Any]]) -> list[Check]:
    """Per server: the prompt tokens each member reused of the council's shared prefix.

    The members' prompts share everything but their own part; a server that reuses it
    computes the prefix once. `warn` where no member reused anything (e.g. llama-server slots
    that do not share a cache) or the server does not say.
    """
    by_server: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for i, member in enumerate(agents.members(ctx.k)):
        if member in reports:
            ref = ctx.member_backend(i)
            spec = ref if isinstance(ref, str) else getattr(ref, "spec", str(ref))
            by_server.setdefault(spec, []).append((member, reports[member]))
    checks = []
    for spec, members in by_server.items():
        parts = [
            f"{m} {'?' if r.get('reused_tokens') is None else r['reused_tokens']}"
            f"/{r.get('shared_tokens') or 0}"
            for m, r in members
        ]
        detail = "reused/shared prefix tokens: " + ", ".join(parts)
        reused = [r.get("reused_tokens") for _, r in members]
        if all(n is None for n in reused):
            checks.append(Check("prefix reuse", spec, "warn", detail + " (server does not say)"))
        elif len(members) > 1 and not any(reused):
            checks.append(Check("prefix reuse", spec, "warn", detail + " (nothing reused)"))
        else:
            checks.append(Check("prefix reuse", spec, "pass", detail))
    return checks


async def run_checks(
    config: CollectiveConfig, *, question: str, council: bool = True
) -> list[Check]:
    """Every smoke check, in order: servers, models, contexts, then one council run."""
    from collective.errors import CollectiveError
    from collective.models.registry import backend_from_spec, close_all
    from collective.models.replicas import split_replicas

    checks: list[Check] = []
    try:
        # Every replica of a replica set is checked on its own.
        named = config.role_backends()
        roles = {r: [m for s in specs for m in split_replicas(s)] for r, specs in named.items()}
        specs = list(dict.fromkeys(spec for specs in roles.values() for spec in specs))
        backends: dict[str, Backend] = {}
        for spec in specs:
            try:
                backends[spec] = backend_from_spec(spec)
            except CollectiveError as exc:
                checks.append(Check("reachable", spec, "fail", str(exc)))
        healthy = set()
        for spec, backend in backends.items():
            health = await backend.health()
            checks.append(
                Check("reachable", backend.spec, "pass" if health.ok else "fail", health.detail)
            )
            if health.ok:
                healthy.add(spec)
                checks.append(await _model_exists(backend))
        for role, role_specs in roles.items():
            for spec in dict.fromkeys(role_specs):
                if spec in healthy:
                    checks.append(await _context(config, role, backends[spec]))
        for spec in backends:
            if spec in healthy:
                # The members of a replica set spread over its replicas.
                on = named.get("specialist", [])
                members = sum(
                    math.ceil(on.count(s) / len(split_replicas(s)))
                    for s in set(on)
                    if spec in split_replicas(s)
                )
                checks.append(await _pool(config, backends[spec], members))
        if council:
            if any(c.status == "fail" for c in checks):
                checks.append(
                    Check("council run", "", "fail", "skipped: fix the failures above first")
                )
            else:
                checks += await _council(config, question)
    finally:
        await close_all()
    return checks


def _table(checks: Sequence[Check]) -> Any:
    from rich.table import Table
    from rich.text import Text

    styles = {"pass": "green", "warn": "bold yellow", "fail": "bold red"}
    table = Table(title="collective smoke", title_justify="left")
    for column in ("check", "target", "result"):
        table.add_column(column)
    table.add_column("detail", overflow="fold")
    for c in checks:
        # Details quote servers' words ([/props+/slots ...]): plain text, never markup.
        status = Text(c.status.upper(), style=styles[c.status])
        table.add_row(c.check, Text(c.target), status, Text(c.detail))
    return table


def smoke(
    config: ConfigOption = None,
    k: Annotated[
        int | None, typer.Option("--k", min=1, max=64, help="Specialists for the council run.")
    ] = None,
    question: Annotated[
        str, typer.Option("--question", help="The question of the council run.")
    ] = DEFAULT_QUESTION,
    no_council: Annotated[
        bool, typer.Option("--no-council", help="Only servers, models and contexts.")
    ] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Check every configured server, model and context, then run the council once."""
    import asyncio

    from collective.commands.errors import user_errors
    from collective.session import load_settings

    with user_errors(json_out=json_out):
        effective = load_settings(config, {"k": k})
        checks = asyncio.run(
            run_checks(effective.config, question=question, council=not no_council)
        )
    failed = [c for c in checks if c.status == "fail" or (strict and c.status == "warn")]
    warned = [c for c in checks if c.status == "warn"]
    if json_out:
        typer.echo(json.dumps({"ok": not failed, "checks": [asdict(c) for c in checks]}))
    else:
        from rich.console import Console

        console = Console()
        console.print(_table(checks))
        verdict = "[bold red]FAIL[/]" if failed else "[bold green]PASS[/]"
        console.print(
            f"smoke: {verdict} ({len(checks)} checks, {len(failed)} failed, {len(warned)} warnings)"
        )
    if failed:
        raise typer.Exit(1)
