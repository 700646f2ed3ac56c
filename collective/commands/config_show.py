"""`collective config show`: the effective configuration and where each value came from.

Mount with `cli_app.add_typer(config_show.app, name="config")`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from collective.commands.options import ConfigOption

if TYPE_CHECKING:
    from collective.config import EffectiveConfig, Source

__all__ = ["app", "effective_rows", "show"]

app = typer.Typer(help="The configuration: one TOML file plus COLLECTIVE_* variables and .env.")


@app.callback()
def _config() -> None:
    """The configuration: one TOML file plus COLLECTIVE_* variables and .env."""


@app.command()
def show(
    config: ConfigOption = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Print every setting's effective value and its source (default, file, .env, env, cli)."""
    from collective.commands.errors import user_errors
    from collective.config import load_config

    with user_errors(json_out=json_out):
        effective = load_config(config)
    rows = effective_rows(effective)
    if json_out:
        typer.echo(
            json.dumps(
                {
                    "file": str(effective.file) if effective.file else None,
                    "values": {key: value for key, value, _, _ in rows},
                    "sources": {key: source for key, _, source, _ in rows},
                    "notes": {key: note for key, _, _, note in rows if note},
                }
            )
        )
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    source = f"file {effective.file}" if effective.file else "no config file (built-in defaults)"
    table = Table(title=f"effective configuration: {source}", title_justify="left")
    table.add_column("key")
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    styles = {"default": "dim", "file": "cyan", ".env": "magenta", "env": "magenta", "cli": "green"}
    for key, value, origin, note in rows:
        text = value if isinstance(value, str) else json.dumps(value)
        how = f" [dim]({escape(note)})[/]" if note else ""
        table.add_row(key, escape(text), f"[{styles[origin]}]{origin}[/]{how}")
    Console().print(table)


def effective_rows(effective: EffectiveConfig) -> list[tuple[str, Any, Source, str]]:
    """`(key, value, source, note)` per setting, with the value in force, never a bare null.

    A setting left unset shows what applies instead (k: the sum of the specialist counts,
    quorum: ceil(k/2), chat: the judge's backend, ...), and the note says how it was derived.
    """
    import math
    from typing import get_args

    from collective.budget.plans import PRESETS, BudgetRole, default_preset
    from collective.kb.demo import default_kb_path

    config = effective.config
    derived: dict[str, tuple[Any, str]] = {
        "k": (config.members, "sum of the specialist counts"),
        "quorum": (math.ceil(config.members / 2), "ceil(k/2)"),
        "chat": (config.chat_backend, "the judge's backend"),
        "kb": (str(default_kb_path()), "the demo KB, seeded on first use"),
        "planner": ("none", "no plan: the members answer the question as it is"),
        "rewriter": ("none", "queries are rewritten without a model"),
        "summarizer": ("none", "memory summaries are extractive"),
        "max_inject": ("profile", "the profile decides"),
        "max_latency_ms": ("none", "no latency limit"),
        "usage_log": ("off", "no usage log"),
        "user_id": ("default", "the long-term memory of user `default`"),
        "agent_profiles": ({}, "each agent uses its role's profile (collective allowances report)"),
        "confident_at": ("off", "the members always answer"),
        "agree_early": ("off", "every member finishes"),
    }
    for role in get_args(BudgetRole):
        if role == "reviewer":  # a peer-review round's plan: shown where it is set
            continue
        preset = default_preset(role)
        derived[f"budgets.{role}"] = (preset, f"the {preset} preset ({PRESETS[preset].n_ctx:,})")
        derived[f"output_caps.{role}"] = (
            PRESETS[preset].output_budget,
            "the preset's output; embedded models: 384",
        )
    rows: list[tuple[str, Any, Source, str]] = []
    for key, value, source in effective.rows():
        if key in ("budgets", "output_caps"):  # an empty table: its roles are listed below
            continue
        unset = value is None or (key == "k" and source == "default")  # k: set from the groups
        if unset and key in derived:
            value, note = derived[key]
            rows.append((key, value, source, note))
        elif key == "agent_profiles" and value == {}:
            rows.append((key, *derived[key][:1], source, derived[key][1]))
        else:
            rows.append((key, value, source, ""))
    present = {key for key, *_ in rows}
    for key, (value, note) in derived.items():
        if key.startswith(("budgets.", "output_caps.")) and key not in present:
            rows.append((key, value, "default", note))
    return rows
