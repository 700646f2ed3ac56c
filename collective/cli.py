"""The `collective` command: ask, chat, smoke, config show, kb, recall, budget.

Start-up is measured (bench/startup.py): this module imports only typer; every command imports
LangGraph, the backends, rich and OpenTelemetry inside its function. `main()` runs the app
without click's standalone handling so that every error a user meets is one line on stderr with
a meaningful exit code (2 usage and config, 3 unavailable backends, 130 Ctrl-C), never a
traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import typer

from collective.commands import ask, budget, chat, config_show, kb, recall, smoke

__all__ = ["app", "main"]

app = typer.Typer(
    name="collective",
    help="A local multi-model council: a planner, K specialists and a judge, every prompt "
    "under an explicit token budget.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("ask")(ask.ask)
app.command("chat")(chat.chat)
app.command("smoke")(smoke.smoke)
app.add_typer(config_show.app, name="config")
app.add_typer(kb.app, name="kb")
app.command("recall")(recall.recall)
app.add_typer(budget.app, name="budget")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI and exit with its status (the console script's entry point)."""
    # typer >= 0.22 vendors click as typer._click; its exceptions are what the app raises.
    from typer._click import exceptions as click_errors

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=args, prog_name="collective", standalone_mode=False)
    except click_errors.NoArgsIsHelpError as exc:
        # `collective` alone (or a group alone): the help is rendered while raising (rich
        # prints it then); plain click returns it as the message.
        if exc.format_message().strip():
            typer.echo(exc.format_message())
        sys.exit(0)
    except click_errors.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "collective"
        typer.echo(f"error: {exc.format_message()} (see `{command} --help`)", err=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("error: interrupted (Ctrl-C)", err=True)
        sys.exit(130)
    except click_errors.ClickException as exc:
        typer.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:
        # A bug, not a user error: one line unless asked for the traceback.
        if os.environ.get("COLLECTIVE_DEBUG"):
            raise
        typer.echo(
            f"error: internal error {type(exc).__name__}: {exc}; rerun with COLLECTIVE_DEBUG=1 "
            "for the traceback and report it",
            err=True,
        )
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
