"""`collective eval QUESTIONS.jsonl`: is the council worth it on my models?

The work is `collective.evaluation.evaluate`; this module parses the options, shows progress
with an ETA on stderr, and prints the table (or one JSON object with `--json`). Ctrl-C stops
after saying how to continue: the rows file keeps every finished question.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from collective.commands.errors import stop_on_ctrl_c, user_errors
from collective.commands.options import (
    ConfigOption,
    EvidenceOption,
    KbOption,
    RetrievalOption,
    missing_kb,
)
from collective.session import load_settings

if TYPE_CHECKING:
    from collective.evaluation import EvalProgress

__all__ = ["evaluate"]

_FORMAT = (
    "Prints accuracy and evidence recall with paired-bootstrap 95% CIs against `single`, "
    "citation precision, claims supported, and per arm its calls, tokens and wall time.\n\n"
    "QUESTIONS is a JSONL file, one question a line: "
    '{"id": "density-c110", "question": "What is the density of C110 copper?", '
    '"numbers": [8.96], "gold_chunks": ["metal/c110_copper.md#Density and melting range"]}; '
    "the gold answer is `numbers` (all stated), `entity` (named; with `entities`, named first "
    "among them) and/or `strings` (all stated); `id`, `kind` and `gold_chunks` are optional. "
    "See docs/eval.md."
)


def _arms(value: str) -> list[str]:
    from collective.modes import MODES

    arms = [a.strip() for a in value.split(",") if a.strip()]
    unknown = [a for a in arms if a not in MODES]
    if unknown or not arms:
        raise typer.BadParameter(f"unknown arm(s) {unknown}; choose among {','.join(MODES)}")
    return list(dict.fromkeys(arms))


QuestionsArgument = Annotated[
    Path,
    typer.Argument(
        help="The question file (JSONL).", metavar="QUESTIONS", dir_okay=False, show_default=False
    ),
]
OutOption = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Rows file (JSONL), a line appended per finished question; run again with the "
        "same file to continue (default: eval-<QUESTIONS name>.jsonl).",
        dir_okay=False,
    ),
]
ArmsOption = Annotated[
    str,
    typer.Option(
        "--arms",
        help="Comma-separated answer modes to compare: single, self-consistency, self-moa, "
        "council, council-review, council-split.",
    ),
]


def evaluate(
    questions: QuestionsArgument,
    out: OutOption = None,
    arms: ArmsOption = "single,self-consistency,self-moa,council,council-split",
    k: Annotated[
        int | None, typer.Option("--k", min=1, max=64, help="Number of specialists (K).")
    ] = None,
    config: ConfigOption = None,
    retrieval: RetrievalOption = None,
    evidence: EvidenceOption = None,
    kb: KbOption = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
) -> None:
    """Ask QUESTIONS in several answer modes on your models and KB; compare them with one call."""
    import asyncio

    from collective.errors import ConfigError
    from collective.evaluation import evaluate as run

    with user_errors(json_out=json_out):
        chosen = _arms(arms)
        if no_kb := missing_kb(kb):
            raise ConfigError(no_kb)
        rows = out or Path(f"eval-{questions.stem}.jsonl")
        overrides = {"k": k, "retrieval": retrieval, "evidence": evidence}
        effective = load_settings(config, {**overrides, "kb": str(kb) if kb else None})
        progress = None if quiet else _progress

        async def main() -> dict[str, Any]:
            from rich.console import Console

            stop_on_ctrl_c(Console(stderr=True))
            return await run(effective.config, questions, rows, chosen, progress)  # type: ignore[arg-type]

        try:
            result = asyncio.run(main())
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise _stopped(rows, json_out) from None
    if json_out:
        import json

        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
        return
    from collective.evaluation import table

    sys.stdout.write(f"{table(result)}\nrows: {result['rows_file']}\n")
    sys.stdout.flush()


def _progress(p: EvalProgress) -> None:
    """One line on stderr per finished question: each arm right or wrong, and the time left."""
    marks = " ".join(
        f"{arm} {'ok' if row['correct'] else 'wrong'}" for arm, row in p.row["arms"].items()
    )
    eta = "" if p.eta_s is None else f", about {_duration(p.eta_s)} left"
    sys.stderr.write(f"[{p.done}/{p.total}] {p.question.id}: {marks}{eta}\n")
    sys.stderr.flush()


evaluate.__doc__ = f"{evaluate.__doc__}\n\n    {_FORMAT}"


def _stopped(rows: Path, json_out: bool) -> typer.Exit:
    """Ctrl-C: one line saying where the finished questions are and how to go on."""
    from collective.commands.errors import Interrupted, error_object, fail

    message = (
        f"interrupted (Ctrl-C); every finished question is kept in {rows}: run the same "
        "command again to continue"
    )
    if json_out:
        import json

        typer.echo(json.dumps(error_object(Interrupted(None), message)))
    return fail(message, 130)


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    if minutes < 1:
        return f"{seconds:.0f} s"
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"
