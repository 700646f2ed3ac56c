"""`collective config show`: the effective configuration and where each value came from.

Mount with `cli_app.add_typer(config_show.app, name="config")`.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from collective.commands.options import ConfigOption

__all__ = ["app", "show"]

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
    from collective.commands.ask import user_errors
    from collective.config import load_config

    with user_errors(json_out=json_out):
        effective = load_config(config)
    rows = effective.rows()
    if json_out:
        typer.echo(
            json.dumps(
                {
                    "file": str(effective.file) if effective.file else None,
                    "values": {key: value for key, value, _ in rows},
                    "sources": {key: source for key, _, source in rows},
                }
            )
        )
        return
    from rich.console import Console
    from rich.table import Table

    source = f"file {effective.file}" if effective.file else "no config file (built-in defaults)"
    table = Table(title=f"effective configuration: {source}", title_justify="left")
    table.add_column("key")
    table.add_column("value", overflow="fold")
    table.add_column("source")
    styles = {"default": "dim", "file": "cyan", ".env": "magenta", "env": "magenta", "cli": "green"}
    for key, value, origin in rows:
        text = value if isinstance(value, str) else json.dumps(value)
        table.add_row(key, text, f"[{styles[origin]}]{origin}[/]")
    Console().print(table)
