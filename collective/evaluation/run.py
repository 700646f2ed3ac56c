"""Ask every question in every arm, one question at a time, appending a line as each finishes.

The arms of one question share their work (`collective.modes.run_arms`). A run that stops
(Ctrl-C, a dead server) loses at most the question in flight: run it again with the same rows
file and it asks only what the file does not hold.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collective.errors import QuorumError
from collective.evaluation.adaptive import adaptive_report
from collective.evaluation.questions import (
    EvalFileError,
    EvalQuestion,
    load_questions,
    resolve_gold,
)
from collective.evaluation.report import summarise
from collective.evaluation.rows import append_row, read_rows
from collective.evaluation.scoring import is_parrot, score
from collective.graph.context import CouncilContext
from collective.modes import ArmsRun, Mode, ModeResult, run_arms, run_mode

if TYPE_CHECKING:
    from collective.config import CollectiveConfig

__all__ = ["DEFAULT_ARMS", "EvalProgress", "arm_row", "evaluate", "run_eval"]


@dataclass(frozen=True)
class EvalProgress:
    """After each question: how far the run is and when it should end."""

    done: int
    """Questions finished, those of earlier runs of the same rows file included."""
    total: int
    question: EvalQuestion
    row: dict[str, Any]
    eta_s: float | None
    """Seconds left at this run's mean time per question (None before the first)."""


def arm_row(question: EvalQuestion, result: ModeResult, gold: Sequence[str]) -> dict[str, Any]:
    """One arm's answer to one question: scored, with its citations against the gold chunks."""
    cited = {c["id"] for c in result.citations}
    wanted = set(gold)
    return {
        "answer": result.answer,
        "correct": score(question, result.answer),
        "parrot": is_parrot(result.answer),
        "cited": sorted(cited),
        "precision": len(cited & wanted) / len(cited) if cited and wanted else None,
        "recall": len(cited & wanted) / len(wanted) if wanted else None,
        "gold_seen": len(wanted & set(result.seen)) / len(wanted) if wanted else None,
        "support": result.citation_support,
        "unknown": len(result.unknown_citations),
        "calls": result.calls,
        "prompt_tokens": result.prompt_tokens,
        "output_tokens": result.output_tokens,
        "wall_s": round(result.wall_s, 2),
        "stages_s": result.stages,
        **result.confidence,
        **({} if result.escalated is None else {"escalated": result.escalated}),
    }


def _failed(error: QuorumError) -> dict[str, Any]:
    """The row of an arm whose council fell below quorum: wrong, at no cost counted."""
    empty = dict.fromkeys(("precision", "recall", "gold_seen", "support"))
    costs = dict.fromkeys(("unknown", "calls", "prompt_tokens", "output_tokens"), 0)
    return {"answer": "", "correct": False, "parrot": False, "error": str(error), "cited": [],
            **empty, **costs, "wall_s": 0.0}  # fmt: skip


async def _ask(question: EvalQuestion, arms: Sequence[Mode], ctx: CouncilContext) -> ArmsRun:
    """The arms on one question; if too few members answer for one arm, each arm alone."""
    try:
        return await run_arms(question.question, arms, ctx)
    except QuorumError:
        results: dict[str, ModeResult | QuorumError] = {}
        started = time.perf_counter()
        for arm in arms:
            try:
                results[arm] = await run_mode(question.question, arm, ctx)
            except QuorumError as error:
                results[arm] = error
        done = [r for r in results.values() if isinstance(r, ModeResult)]
        return ArmsRun(
            results=results,  # type: ignore[arg-type]
            calls=sum(r.calls for r in done),
            prompt_tokens=sum(r.prompt_tokens for r in done),
            output_tokens=sum(r.output_tokens for r in done),
            wall_s=time.perf_counter() - started,
        )


async def run_eval(
    questions: Sequence[EvalQuestion],
    arms: Sequence[Mode],
    ctx: CouncilContext,
    rows_path: Path,
    gold: dict[str, list[str]],
    on_progress: Callable[[EvalProgress], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every question in every arm; returns the rows by question id (earlier runs' too).

    Args:
        questions: The questions, asked in order.
        arms: The modes to compare (`collective.modes.MODES`).
        ctx: The council's settings (the user's config and KB).
        rows_path: The rows file: read first (what it holds is not asked again), then a line
            appended as each question finishes.
        gold: Each question's gold chunk ids (`resolve_gold`).
        on_progress: Called after each question.
    """
    rows = read_rows(rows_path, questions)
    done = sum(all(a in rows.get(q.id, {}).get("arms", {}) for a in arms) for q in questions)
    spent: list[float] = []
    for question in questions:
        held = rows.get(question.id, {}).get("arms", {})
        missing = [a for a in arms if a not in held]
        if not missing:
            continue
        started = time.perf_counter()
        run = await _ask(question, missing, ctx)
        line = {
            "id": question.id,
            "question": question.question,
            "kind": question.kind,
            "arms": {
                arm: _failed(r)
                if isinstance(r, QuorumError)
                else arm_row(question, r, gold[question.id])
                for arm, r in run.results.items()
            },
            "spent": {
                "calls": run.calls,
                "prompt_tokens": run.prompt_tokens,
                "output_tokens": run.output_tokens,
                "wall_s": round(run.wall_s, 2),
            },
        }
        append_row(rows_path, line)
        merged = rows.setdefault(question.id, {"id": question.id, "question": question.question,
                                               "arms": {}, "spent": []})  # fmt: skip
        merged["arms"].update(line["arms"])
        merged["spent"].append(line["spent"])
        done += 1
        spent.append(time.perf_counter() - started)
        if on_progress is not None:
            left = len(questions) - done
            eta = sum(spent) / len(spent) * left
            on_progress(EvalProgress(done, len(questions), question, line, eta))
    return rows


DEFAULT_ARMS: tuple[Mode, ...] = (
    Mode.single,
    Mode.self_consistency,
    Mode.self_moa,
    Mode.council,
    Mode.council_split,
)
"""The arms `collective eval` runs unless told (council-review costs 2K+1 calls: on request)."""


async def evaluate(
    config: CollectiveConfig,
    questions_path: Path,
    rows_path: Path,
    arms: Sequence[Mode] = DEFAULT_ARMS,
    on_progress: Callable[[EvalProgress], None] | None = None,
) -> dict[str, Any]:
    """`collective eval`: the question file on the config's models and KB, then the summary.

    Resumes from `rows_path` (see `run_eval`); the summary covers every question it holds for
    every arm (`report.summarise`), with `rows_file` and this run's `wall_s` added.

    Raises:
        EvalFileError: A malformed question file, a gold ref not in the KB, a foreign rows file.
        BackendError: A model failed where the run cannot go on (the judge).
    """
    from collective.graph.context import open_knowledge
    from collective.models.registry import close_all

    questions = load_questions(questions_path)
    read_rows(rows_path, questions)  # a file that is not a rows file: refused before the KB opens
    ctx = config.council_context()
    gold: dict[str, list[str]] = {q.id: [] for q in questions}
    if any(q.gold_chunks for q in questions):
        store = open_knowledge(ctx)
        listed = getattr(store, "list", None)
        if listed is None:
            raise EvalFileError(
                f"{questions_path}: gold chunks need a knowledge base that lists its chunks "
                "(a SQLite KB, --kb FILE)"
            )
        gold = resolve_gold(questions, listed(), questions_path)
    started = time.perf_counter()
    try:
        rows = await run_eval(questions, arms, ctx, rows_path, gold, on_progress)
    finally:
        await close_all()
    summary = summarise(questions, rows, arms)
    if tuned := adaptive_report(questions, rows):
        summary["adaptive_threshold"] = tuned
    return {**summary, "arms": list(arms), "rows_file": str(rows_path),
            "wall_s": round(time.perf_counter() - started, 1)}  # fmt: skip
