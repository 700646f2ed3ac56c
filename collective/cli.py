"""The `collective` command and its subcommands (ask, chat, smoke, eval, kb, models, ...).

Its subcommands: ask, chat, smoke, eval, config show, kb, recall, models, allowances, threads.

Start-up is measured (bench/startup.py): this module imports only typer; every command imports
LangGraph, the backends, rich and OpenTelemetry inside its function. `main()` runs the app
without click's standalone handling so that every error a user meets is one line on stderr with
a meaningful exit code (2 usage and config, 3 unavailable backends, 130 Ctrl-C), never a
traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from collective.commands import (
    ask,
    budget,
    chat,
    config_show,
    evaluate,
    kb,
    models,
    recall,
    serve,
    smoke,
    threads,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="collective",
    help="A local multi-model council: K specialists answer from your knowledge base and a "
    "judge rules, every prompt under an explicit token budget. The default council runs in "
    "process: two specialists sampling the judge's own model (Qwen2.5-Coder-1.5B) and that "
    "judge, no planner (set `planner` in collective.toml for one).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _collective(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Show the native llama.cpp logs (also COLLECTIVE_VERBOSE=1).",
        ),
    ] = False,
) -> None:
    """A local multi-model council: K specialists and a judge (by default no planner)."""
    import logging

    from collective import environment

    verbose = verbose or environment.verbose()
    # llama-cpp-python prints every native log line unless its logger says otherwise; its
    # level table is older than ggml's (warnings arrive as ERROR), so quiet means CRITICAL.
    logger = logging.getLogger("llama-cpp-python")
    logging.Logger.setLevel(logger, logging.DEBUG if verbose else logging.CRITICAL)
    # Every `Llama(verbose=False)` resets the level to ERROR; the command line's choice stands.
    logger.setLevel = lambda level: None  # type: ignore[method-assign]


def _no_flag_metavar() -> None:
    """Boolean flags take no value: show no `<bool>` type for them in `--help`."""
    from typer.core import TyperOption

    display = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else display(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_no_flag_metavar()
app.command("ask")(ask.ask)
app.command("chat")(chat.chat)
app.command("smoke")(smoke.smoke)
app.command("eval")(evaluate.evaluate)
app.add_typer(config_show.app, name="config")
app.add_typer(kb.app, name="kb")
app.command("recall")(recall.recall)
app.command("models")(models.models)
app.add_typer(budget.app, name="allowances")
app.add_typer(budget.app, name="budget", hidden=True)  # the old name, with a note
app.add_typer(threads.app, name="threads")
# The council as servers (docs/serving.md): an OpenAI-compatible API and MCP tools.
app.command("serve")(serve.serve)
app.command("mcp")(serve.mcp)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI and exit with its status (the console script's entry point)."""
    import warnings

    # typer >= 0.22 vendors click as typer._click; its exceptions are what the app raises.
    from typer._click import exceptions as click_errors

    warnings.showwarning = _note
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
        command = exc.ctx.command_path if exc.ctx else _command_path(args)
        _fail(args, exc, f"{exc.format_message()} (see `{command} --help`)", 2)
    except (typer.Abort, KeyboardInterrupt) as exc:
        _fail(args, exc, "interrupted (Ctrl-C)", 130)
    except click_errors.ClickException as exc:
        _fail(args, exc, exc.format_message(), exc.exit_code)
    except Exception as exc:
        from collective.session import storage_error

        environment = storage_error(exc)
        if environment is not None:  # a read-only directory, a broken database file
            _fail(args, environment, str(environment), 2)
        # A bug, not a user error: one line unless asked for the traceback.
        from collective.environment import debug

        if debug():
            raise
        message = (
            f"internal error {type(exc).__name__}: {exc}; rerun with COLLECTIVE_DEBUG=1 "
            "for the traceback and report it"
        )
        _fail(args, exc, message, 1)
    sys.exit(code if isinstance(code, int) else 0)


def _note(message: Warning | str, *_: Any, **__: Any) -> None:
    """A warning (a renamed setting's, say) as one `note:` line on stderr, no source line."""
    typer.echo(f"note: {message}", err=True)


def _fail(args: Sequence[str], exc: BaseException, message: str, code: int) -> None:
    """One `error:` line on stderr (and the error object on stdout with `--json`); exit."""
    if "--json" in args:
        import json

        error = {"type": type(exc).__name__, "message": message, "exit_code": code}
        typer.echo(json.dumps({"error": error}))
    typer.echo(f"error: {message}", err=True)
    sys.exit(code)


def _command_path(args: Sequence[str]) -> str:
    """`collective ask` for `ask q --k` (click names no command when an option lacks a value)."""
    command: Any = typer.main.get_command(app)
    path = ["collective"]
    for arg in args:
        sub = getattr(command, "commands", {}).get(arg)
        if sub is None:
            break
        path.append(arg)
        command = sub
    return " ".join(path)


if __name__ == "__main__":
    main()
