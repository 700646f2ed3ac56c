"""bench/council_eval.py without models: the QA set, the scoring and the bootstrap."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import council_eval as ce  # noqa: E402


@pytest.fixture(scope="module")
def questions(tmp_path_factory):
    _, by_ref = ce.open_kb(tmp_path_factory.mktemp("kb"))
    return ce.build_questions(by_ref), set(by_ref.values())


def test_the_set_is_large_mixed_and_grounded_in_real_chunks(questions):
    qs, chunk_ids = questions
    assert len(qs) >= 80 and len({q.id for q in qs}) == len(qs)
    kinds = {k: sum(q.kind == k for q in qs) for k in ("direct", "paraphrase", "comparison")}
    assert min(kinds.values()) >= 15, kinds
    for q in qs:
        assert q.gold and set(q.gold) <= chunk_ids
        assert q.numbers or (q.winner and q.loser)


def test_gold_answers_come_from_the_fact_tables(questions):
    by_id = {q.id: q for q in questions[0]}
    assert by_id["density-6061_t6_aluminium"].numbers == [2.7]
    assert by_id["nozzle-pla"].numbers == [190, 220]
    assert by_id["janka-white_oak"].numbers == [1360]


def test_scoring_needs_every_number_and_refuses_parrots():
    q = ce.Question("q", "direct", "nozzle for PLA?", [190, 220])
    assert ce.score(q, "Print PLA at 190–220 °C [KB#mem_1].")
    assert ce.score(q, "Between 190 and 220 degrees.")
    assert not ce.score(q, "About 200 °C.")
    assert not ce.score(q, "[KB#mem_1] [Score: 0.91] Print temperatures: 190-220 °C")
    assert not ce.score(q, "You are the judge of a council... 190-220")
    assert not ce.score(ce.Question("d", "direct", "?", [1360]), "1,350 lbf")
    assert ce.score(ce.Question("d", "direct", "?", [1360]), "about 1,360 lbf")


def test_comparisons_need_the_winner_named_first():
    q = ce.Question("c", "comparison", "denser?", winner="C110 copper", loser="O1 tool steel")
    assert ce.score(q, "C110 copper is denser than O1 tool steel.")
    assert ce.score(q, "c110 copper (8.96 g/cm3).")
    assert not ce.score(q, "O1 tool steel is lighter than C110 copper... ")
    assert not ce.score(q, "Neither.")
    # restating the pair names no winner; the conclusion does
    assert not ce.score(q, "Between C110 copper and O1 tool steel, O1 tool steel is denser.")
    assert ce.score(q, "Comparing C110 copper or O1 tool steel: C110 copper is denser.")


def test_paired_bootstrap_interval():
    a = [True] * 8 + [False] * 2
    low, high = ce.bootstrap_diff(a, a)
    assert low == high == 0
    low, high = ce.bootstrap_diff([True] * 10, [False] * 10)
    assert low == high == 1
    low, high = ce.bootstrap_diff(a, [True] * 5 + [False] * 5)
    assert low <= 0.3 <= high and low < high


def test_subset_spreads_over_kinds(questions):
    kinds = {q.kind for q in ce.subset(questions[0], 5)}
    assert kinds == {"direct", "paraphrase", "comparison"}
