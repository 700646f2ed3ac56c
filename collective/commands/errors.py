"""How every command tells the user about a failure: one line on stderr and an exit code."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

from collective.session import RunStatus, storage_error

__all__ = ["Interrupted", "error_object", "fail", "stop_on_ctrl_c", "user_errors"]


class Interrupted(Exception):
    """Ctrl-C during a run; carries the thread to resume."""

    def __init__(self, thread_id: str | None) -> None:
        super().__init__(thread_id)
        self.thread_id = thread_id


def fail(message: str, code: int) -> typer.Exit:
    """Print one `error:` line on stderr and return the exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _hint(status: RunStatus, exc: BaseException) -> str:
    """`; thread ID ...` for the error line, empty before the run started."""
    from collective.errors import QuorumError

    thread = status.thread_id
    if not thread:
        return ""
    if status.resumable and not isinstance(exc, QuorumError):
        return (
            f"; the run is checkpointed on thread {thread}: resume it with "
            f"`collective ask --thread {thread}`"
        )
    return f"; thread {thread} keeps what finished (see --thread {thread})"


@contextmanager
def user_errors(*, json_out: bool = False) -> Iterator[RunStatus]:
    """Turn collective's errors and Ctrl-C into one line on stderr and an exit code.

    `CollectiveError` exits with its `exit_code` (2 usage/config, 3 unavailable backends);
    Ctrl-C exits 130 and says how to resume. A failed run names its thread (the yielded
    `RunStatus`, filled in by `collective.session.ask`). With `json_out`, stdout still gets
    exactly one JSON object: `{"error": {...}}` (plus the proposals that arrived, for a quorum
    failure).
    """
    from collective.errors import CollectiveError, QuorumError

    status = RunStatus()
    try:
        yield status
    except CollectiveError as exc:
        extra: dict[str, Any] = {}
        if isinstance(exc, QuorumError):
            extra["proposals"] = exc.proposals
        message = " ".join(str(exc).split()) + _hint(status, exc)
        raise _error_exit(exc, message, json_out, status, extra) from None
    except (KeyboardInterrupt, Interrupted) as exc:
        thread = exc.thread_id if isinstance(exc, Interrupted) else None
        hint = (
            f"its checkpoint is kept: resume with `collective ask --thread {thread}`"
            if thread
            else "nothing was changed"
        )
        status.thread_id, status.resumable = thread, bool(thread)
        error = Interrupted(thread)
        raise _error_exit(error, f"interrupted (Ctrl-C); {hint}", json_out, status, {}) from None
    except (OSError, sqlite3.Error) as exc:
        environment = storage_error(exc)
        if environment is None:
            raise
        message = str(environment) + _hint(status, environment)
        raise _error_exit(environment, message, json_out, status, {}) from None


def error_object(exc: BaseException, message: str, thread_id: str | None = None) -> dict[str, Any]:
    """The `{"error": {...}}` object `--json` prints for any failure."""
    code = getattr(exc, "exit_code", 130 if isinstance(exc, Interrupted) else 1)
    error: dict[str, Any] = {"type": type(exc).__name__, "message": message, "exit_code": code}
    if thread_id:
        error["thread_id"] = thread_id
    return {"error": error}


def _error_exit(
    exc: BaseException,
    message: str,
    json_out: bool,
    status: RunStatus,
    extra: dict[str, Any],
) -> typer.Exit:
    import json

    code = 130 if isinstance(exc, Interrupted) else getattr(exc, "exit_code", 1)
    if json_out:
        typer.echo(json.dumps({**error_object(exc, message, status.thread_id), **extra}))
    return fail(message, code)


def stop_on_ctrl_c(err: Any) -> None:
    """Ctrl-C says "stopping..." at once and cancels the run; a second one quits at once.

    Call inside the running event loop (its main task is what Ctrl-C cancels).
    """
    import asyncio
    import os
    import signal

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    pressed: list[bool] = []

    def on_sigint() -> None:
        if pressed:
            sys.stderr.write("error: interrupted (Ctrl-C twice); finished work is checkpointed\n")
            sys.stderr.flush()
            os._exit(130)
        pressed.append(True)
        err.print("[yellow]stopping... (Ctrl-C again to quit at once)[/yellow]", highlight=False)
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
        return
