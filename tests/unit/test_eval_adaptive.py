"""`adaptive`'s threshold, chosen on the tuning half of recorded rows, reported on the other."""

from __future__ import annotations

from typing import Any

from collective.evaluation.adaptive import (
    adaptive_at,
    adaptive_report,
    choose_threshold,
    split_halves,
)
from collective.evaluation.questions import EvalQuestion
from collective.evaluation.report import adaptive_table


def _q(i: int) -> EvalQuestion:
    return EvalQuestion(id=f"q{i}", question=f"question {i}?", strings=("right",), kind="k")


def _arm(answer: str, calls: int, wall: float, lowest: float | None = None, **extra: Any) -> dict:
    row = {"answer": answer, "calls": calls, "output_tokens": 10 * calls, "wall_s": wall}
    if lowest is not None:
        row["confidence"] = {"mean": lowest / 2, "lowest": lowest, "tokens": 40, "window": 12}
    return {**row, **extra}


def _rows(cases: list[tuple[float, bool, bool]]) -> dict[str, dict]:
    """Per question: the own answer's `lowest`, whether single and self-moa are right."""
    rows = {}
    for i, (lowest, single_right, moa_right) in enumerate(cases):
        stages = {"retrieval": 0.5, "own": 10.0, "members": 12.0, "verdict": 3.0}
        rows[f"q{i}"] = {
            "arms": {
                "single": _arm("right" if single_right else "wrong", 1, 10.5, lowest),
                "self-moa": _arm("right" if moa_right else "wrong", 3, 16.0, stages_s=stages),
            }
        }
    return rows


def test_halves_alternate_in_file_order() -> None:
    tuning, test = split_halves([_q(i) for i in range(5)])
    assert [q.id for q in tuning] == ["q0", "q2", "q4"]
    assert [q.id for q in test] == ["q1", "q3"]


def test_a_confident_answer_is_singles_and_an_unsure_one_pays_for_both() -> None:
    arms = _rows([(-0.2, True, False)])["q0"]["arms"]
    sure = adaptive_at(arms, -0.5)
    assert sure["answer"] == "right" and sure["calls"] == 1 and sure["escalated"] is False
    unsure = adaptive_at(arms, -0.1)
    assert unsure["answer"] == "wrong" and unsure["calls"] == 3 and unsure["escalated"]
    assert unsure["wall_s"] == 25.5  # own, then the samples, then the verdict: in a row


def test_no_confidence_means_the_samples() -> None:
    arms = {
        "single": _arm("wrong", 1, 10.0),  # a backend that cannot say
        "self-moa": _arm("right", 3, 16.0),
    }
    got = adaptive_at(arms, -100.0)
    assert got["escalated"] and got["answer"] == "right"
    assert got["wall_s"] == 26.0  # no stages recorded: both arms' times


def test_the_threshold_separates_sure_right_answers_from_unsure_wrong_ones() -> None:
    # sure answers (>= -0.4) are right alone; unsure ones need the samples
    cases = [(-0.1, True, True), (-0.3, True, False), (-0.9, False, True), (-1.5, False, True)]
    questions = [_q(i) for i in range(4)]
    assert choose_threshold(questions, _rows(cases)) == -0.3


def test_ties_go_to_the_cheaper_threshold() -> None:
    # every arm is right everywhere: the cheapest is "always confident" (the lowest seen)
    cases = [(-0.1, True, True), (-0.7, True, True), (-2.0, True, True)]
    assert choose_threshold([_q(i) for i in range(3)], _rows(cases)) == -2.0


def test_never_confident_when_single_is_always_worse() -> None:
    cases = [(-0.1, False, True), (-0.7, False, True)]
    assert choose_threshold([_q(0), _q(1)], _rows(cases)) == float("inf")


def test_the_report_tunes_on_one_half_and_reports_the_other() -> None:
    # tuning half (even places) says -0.3; the test half then has one sure wrong answer
    cases = [
        (-0.1, True, True), (-0.2, False, True),
        (-0.3, True, False), (-0.25, True, True),
        (-0.9, False, True), (-1.2, False, True),
    ]  # fmt: skip
    questions = [_q(i) for i in range(6)]
    report = adaptive_report(questions, _rows(cases))
    assert report is not None
    assert report["threshold"] == -0.3
    assert report["tuning"]["accuracy"] == 1.0 and report["tuning"]["escalated"] == 1
    assert report["test"]["n"] == 3 and report["test"]["escalated"] == 1
    assert report["test"]["accuracy"] == 2 / 3  # q1 was sure and wrong
    text = adaptive_table(report)
    assert "-0.300" in text and "| test | 3 | 0.67 | 1 |" in text


def test_no_report_without_both_arms_or_any_confidence() -> None:
    questions = [_q(i) for i in range(4)]
    rows = _rows([(-0.1, True, True)] * 4)
    for row in rows.values():
        del row["arms"]["single"]["confidence"]
    assert adaptive_report(questions, rows) is None
    assert adaptive_report(questions, {"q0": {"arms": {"single": {}}}}) is None
