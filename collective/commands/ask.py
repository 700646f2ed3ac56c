"""`collective ask "QUESTION"`: one council run, shown live, then the verdict and its budgets.

The run itself is `collective.session.ask` (checkpointed on a thread, resumed with the thread's
own settings, preflight first); this module parses the options and prints. `--thread ID`
continues a conversation, and a run that was interrupted (Ctrl-C, a dead server) is resumed
where it stopped, without re-running the specialists that had finished.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from collective import agents
from collective.agents import Mode
from collective.commands.errors import Interrupted, stop_on_ctrl_c, user_errors
from collective.commands.options import (
    ConfigOption,
    EvidenceOption,
    KbOption,
    QuestionArgument,
    QuestionFileOption,
    RetrievalOption,
    missing_kb,
)
from collective.session import RunStatus, load_settings

if TYPE_CHECKING:
    from collective.config import CollectiveConfig
    from collective.session import RunStart, Watch

__all__ = ["ask", "print_result"]


def ask(
    question: QuestionArgument = None,
    question_file: QuestionFileOption = None,
    k: Annotated[
        int | None, typer.Option("--k", min=1, max=64, help="Number of specialists.")
    ] = None,
    config: ConfigOption = None,
    retrieval: RetrievalOption = None,
    evidence: EvidenceOption = None,
    kb: KbOption = None,
    thread: Annotated[
        str | None, typer.Option("--thread", "-t", help="Continue this conversation thread.")
    ] = None,
    abandon: Annotated[
        bool,
        typer.Option(
            "--abandon", help="A new question on --thread drops the thread's unfinished run."
        ),
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Only the verdict and citations.")
    ] = False,
    review: Annotated[
        bool | None, typer.Option("--review/--no-review", help="Peer review before the judge.")
    ] = None,
    checkpoints: Annotated[
        str | None,
        typer.Option(
            "--checkpoints",
            help="Checkpoint database: a SQLite file (default: .collective/checkpoints.sqlite) "
            "or a postgresql:// URL.",
        ),
    ] = None,
    mode: Annotated[
        Mode,
        typer.Option(
            "--mode",
            help="council (the graph; council-review/-split: --review, --evidence split) or "
            "the judge's model alone: single (its own answer), self-consistency (that and K-1 "
            "samples, the most consistent), self-moa (that weighed against K-1 samples).",
        ),
    ] = Mode.council,
) -> None:
    """Ask the council one question: live progress, then the verdict, citations and budgets."""
    import asyncio

    from collective.session import answer_in_mode

    with user_errors(json_out=json_out) as status:
        question = _question_text(question, question_file)
        _check_usage(question, thread, kb, mode)
        overrides: dict[str, Any] = {
            "k": k,
            "retrieval": retrieval,
            "kb": str(kb) if kb else None,
            "review": review,
            "evidence": evidence,
        }
        overrides |= _mode_settings(mode, overrides)
        effective = load_settings(config, {**overrides, "checkpoints": checkpoints})
        given = _given(overrides, config)
        if mode not in agents.GRAPH_MODES:
            assert question is not None  # _check_usage
            result = asyncio.run(answer_in_mode(effective.config, question, mode.value))
        else:
            result = _run_with_progress(
                effective.config,
                question,
                thread or uuid.uuid4().hex[:12],
                given=given,
                abandon=abandon,
                status=status,
                show_progress=not quiet and (not json_out or _stderr_is_terminal()),
            )
    print_result(result, json_out=json_out, quiet=quiet)


def _given(overrides: dict[str, Any], config: Path | None) -> dict[str, str]:
    """How each setting chosen on purpose was given (`k` -> `--k`; a file: `--config`)."""
    given = {key: f"--{key}" for key, value in overrides.items() if value is not None}
    if config is not None:  # a file given on purpose: each setting a thread keeps too
        from collective.config import MACHINE_KEYS, CollectiveConfig

        kept = [name for name in CollectiveConfig.model_fields if name not in MACHINE_KEYS]
        given = dict.fromkeys(kept, "--config") | given
    return given


def _question_text(question: str | None, question_file: Path | None) -> str | None:
    """The question as given, or read from `--question-file` or standard input (`-`)."""
    from collective.errors import ConfigError
    from collective.question import read_question

    if question_file is not None:
        if question is not None:
            raise ConfigError("give the question as an argument or --question-file, not both")
        return read_question(question_file)
    return read_question("-") if question == "-" else question


def _mode_settings(mode: Mode, overrides: dict[str, Any]) -> dict[str, Any]:
    """The settings a council mode means; an option that says otherwise is refused."""
    from collective.errors import ConfigError

    settings = agents.GRAPH_MODES.get(mode, {})
    for key, value in settings.items():
        if overrides[key] not in (None, value):
            raise ConfigError(f"--mode {mode.value} sets {key} {value}; leave out --{key}")
    return settings


def _check_usage(question: str | None, thread: str | None, kb: Path | None, mode: Mode) -> None:
    """Refuse what cannot run: no or an empty question, a missing `--kb`, `--mode` on a resume."""
    from collective.errors import ConfigError
    from collective.question import is_blank

    if question is not None and is_blank(question):
        raise ConfigError(
            'the question is empty; ask something, e.g. collective ask "PETG or ASA?"'
        )
    if question is None and thread is None:
        raise ConfigError('no question; use collective ask "QUESTION" (or --thread ID to resume)')
    if no_kb := missing_kb(kb):
        raise ConfigError(no_kb)
    if question is None and mode not in agents.GRAPH_MODES:
        raise ConfigError(f"--mode {mode.value} answers a new question; --thread needs council")


def _stderr_is_terminal() -> bool:
    """Progress goes to stderr; with --json only where a person watches it."""
    from rich.console import Console

    return Console(stderr=True).is_terminal


def _run_with_progress(
    config: CollectiveConfig,
    question: str | None,
    thread_id: str,
    *,
    given: dict[str, str],
    abandon: bool,
    status: RunStatus,
    show_progress: bool,
) -> dict[str, Any]:
    """`collective.session.ask` with the live view on stderr and Ctrl-C that stops it.

    `given` names how each setting chosen on purpose was given (`k` -> `--k`), for the
    message that refuses it on a resume.
    """
    import asyncio
    from contextlib import ExitStack

    from rich.console import Console

    from collective.commands.render import ProgressView
    from collective.errors import ConfigError
    from collective.session import SettingsConflict, Watch
    from collective.session import ask as ask_council

    err = Console(stderr=True)
    views = ExitStack()

    def on_start(start: RunStart) -> Watch:
        view = ProgressView(start.config.members, err, planned=start.config.planner is not None)
        if show_progress:
            views.enter_context(view)
        return Watch(
            on_event=view.event,
            on_finished=lambda node, error: view.finished(node, failed=error),
            on_note=lambda note: (
                err.print(f"[dim]{note}[/dim]", highlight=False) if show_progress else None
            ),
        )

    async def main() -> dict[str, Any]:
        stop_on_ctrl_c(err)
        with views:
            try:
                return await ask_council(
                    config,
                    question,
                    thread_id,
                    explicit=list(given),
                    abandon=abandon,
                    on_start=on_start,
                    status=status,
                )
            except SettingsConflict as exc:
                raise ConfigError(exc.explain(given)) from None
            except asyncio.CancelledError:
                raise Interrupted(thread_id) from None

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        raise Interrupted(thread_id) from None


def print_result(result: dict[str, Any], *, json_out: bool, quiet: bool) -> None:
    """The run's output: one JSON object, or the verdict, citations and budgets (and cuts)."""
    if json_out:
        import json

        sys.stdout.write(json.dumps(result, default=str) + "\n")
        sys.stdout.flush()
        return
    from rich.console import Console

    from collective.commands.render import render_result

    console = Console()
    render_result(console, result, thread_id=result.get("thread_id"), quiet=quiet)
    reports = {b["node"]: b for b in result.get("budgets") or []}
    # A cut answer ends at its last finished sentence (`collective.prompts.council.finished`).
    cuts = []
    if result.get("answer_cut"):
        cuts.append(("the verdict was cut at its", reports.get(agents.JUDGE), "judge"))
    if cut := [p["member"] for p in result["proposals"] if p["answer_cut"]]:
        # Samples answered by one call share its report, under the first one's name.
        members = [b for b in reports.values() if agents.role_of(b["node"]) == "specialist"]
        report = reports.get(cut[0]) or (members[0] if members else None)
        who = f"{cut[0]} was cut at its" if len(cut) == 1 else f"{', '.join(cut)} were cut at their"
        cuts.append((who, report, "specialist"))
    for who, report, role in cuts:
        cap = (report or {}).get("max_output_tokens", "?")
        console.print(
            f"[bold yellow]✂ {who} output cap ({cap} tokens, finish_reason length): what was "
            f"not finished is left out; raise output_caps.{role} in the config[/]",
            highlight=False,
        )
