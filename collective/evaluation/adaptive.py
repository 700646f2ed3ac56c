"""The `adaptive` arm's threshold, chosen on one half of the questions and reported on the other.

`adaptive` answers with `single`'s answer where the judge's model was sure of it, else with
`self-moa`'s (its samples drawn after the own answer). So its outcome at any threshold follows
from the `single` and `self-moa` rows an eval recorded (with the own answer's `confidence`):
`adaptive_at` replays it, `choose_threshold` picks the threshold on the tuning half (every other
question in file order, from the first: `split_halves`) and `adaptive_report` reports it on the
other half, which played no part in the choice.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from collective.agents import Mode
from collective.evaluation.questions import EvalQuestion
from collective.evaluation.scoring import score
from collective.models.confidence import is_confident

__all__ = ["adaptive_at", "adaptive_report", "choose_threshold", "split_halves"]

NEEDED = (Mode.single.value, Mode.self_moa.value)
"""The arms whose rows the replay reads."""


def split_halves(
    questions: Sequence[EvalQuestion],
) -> tuple[list[EvalQuestion], list[EvalQuestion]]:
    """(tuning, test): the questions at even and at odd places of the file, in order.

    Alternate lines, not the first half against the second: the bundled file groups questions
    by kind, and each half should hold every kind.
    """
    return list(questions[0::2]), list(questions[1::2])


def adaptive_at(arms: Mapping[str, Mapping[str, Any]], threshold: float) -> dict[str, Any]:
    """What `adaptive` would have given on one question at `threshold`, from its arms' rows.

    Confident (`single`'s row's `confidence` at the threshold): `single`'s answer and cost.
    Else `self-moa`'s answer at the cost of the own answer followed by the samples and the
    verdict (their stages' seconds added, as `collective.modes.run_arms` counts `adaptive`).
    """
    single, moa = arms["single"], arms["self-moa"]
    if is_confident(single, threshold):
        return {**single, "escalated": False}
    stages = moa.get("stages_s") or {}
    wall = sum(stages.values()) if stages else single["wall_s"] + moa["wall_s"]
    return {**moa, "wall_s": round(wall, 2), "escalated": True}


def _costs(rows: list[dict[str, Any]], questions: Sequence[EvalQuestion]) -> dict[str, Any]:
    correct = [
        bool(score(q, r["answer"]) and not r.get("error"))
        for q, r in zip(questions, rows, strict=True)
    ]
    n = len(rows)
    return {
        "n": n,
        "accuracy": statistics.mean(correct) if n else 0.0,
        "escalated": sum(r["escalated"] for r in rows),
        "calls_per_q": statistics.mean(r["calls"] for r in rows) if n else 0.0,
        "output_tokens_per_q": statistics.mean(r["output_tokens"] for r in rows) if n else 0.0,
        "wall_s_per_q": statistics.mean(r["wall_s"] for r in rows) if n else 0.0,
    }


def _replay(
    questions: Sequence[EvalQuestion], rows: Mapping[str, Mapping[str, Any]], threshold: float
) -> dict[str, Any]:
    return _costs([adaptive_at(rows[q.id]["arms"], threshold) for q in questions], questions)


def choose_threshold(
    questions: Sequence[EvalQuestion], rows: Mapping[str, Mapping[str, Any]]
) -> float:
    """The threshold on `Confidence.lowest` with the best accuracy on `questions`.

    Candidates: every own answer's `lowest` among them (confident from it on), and one above
    them all (always the samples). Ties go to the cheaper (fewer calls, then less wall time),
    then to the higher threshold (the safer one).

    Args:
        questions: The tuning half, each answered in `single` and `self-moa` in `rows`.
        rows: The eval's rows by question id (`collective.evaluation.rows.read_rows`).
    """
    seen = {
        float(c["lowest"])
        for q in questions
        if (c := rows[q.id]["arms"]["single"].get("confidence"))
    }
    candidates = sorted(seen | {math.inf})  # inf: nothing is confident

    def rank(threshold: float) -> tuple[float, float, float, float]:
        s = _replay(questions, rows, threshold)
        return (s["accuracy"], -s["calls_per_q"], -s["wall_s_per_q"], threshold)

    return max(candidates, key=rank)


def adaptive_report(
    questions: Sequence[EvalQuestion], rows: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The threshold chosen on the tuning half, and `adaptive` at it on each half.

    Only the questions answered in `single` and `self-moa` count; None where either half has
    none, or no own answer has a confidence (a backend that cannot say: adaptive is self-moa).

    Returns:
        `{"threshold", "tuning": {...}, "test": {...}}`, each half with `n`, `accuracy`, how
        many `escalated`, `calls_per_q`, `output_tokens_per_q`, `wall_s_per_q`.
    """

    def answered(half: list[EvalQuestion]) -> list[EvalQuestion]:
        return [q for q in half if all(a in rows.get(q.id, {}).get("arms", {}) for a in NEEDED)]

    tuning, test = map(answered, split_halves(questions))  # halves by place in the file
    if not tuning or not test:
        return None
    if not any(rows[q.id]["arms"]["single"].get("confidence") for q in [*tuning, *test]):
        return None
    threshold = choose_threshold(tuning, rows)
    return {
        "threshold": threshold if math.isfinite(threshold) else None,
        "tuning": _replay(tuning, rows, threshold),
        "test": _replay(test, rows, threshold),
    }
