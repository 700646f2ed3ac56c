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
        assert q.numbers or (q.winner and (q.loser or q.entities))


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
    assert kinds == {"direct", "paraphrase", "comparison", "wide"}


def test_wide_questions_rank_5_to_10_entities_with_a_unique_winner_and_every_gold_chunk(questions):
    wide = [q for q in questions[0] if q.kind == "wide"]
    assert len(wide) >= 20
    for q in wide:
        assert 5 <= len(q.entities) <= 10 and q.winner in q.entities
        assert len(q.gold) == len(set(q.gold)) == len(q.entities)  # one chunk per entity
        assert all(name in q.text for name in q.entities)
    by_id = {q.id: q for q in wide}
    for q in by_id.values():  # the winner from the fact table, e.g. PTFE's 260 °C service
        if q.id.startswith("hottest-plastic") and "PTFE" in q.entities:
            assert q.winner == "PTFE"


def test_wide_answers_need_the_winner_named_first_restated_lists_aside():
    q = ce.Question(
        "w",
        "wide",
        "?",
        winner="PEEK rod",
        entities=["HDPE", "PEEK rod", "6061-T6 aluminium", "PA6 nylon"],
    )
    assert ce.score(q, "PEEK rod, at 250 °C [KB#mem_1].")
    assert ce.score(q, "peek is the highest (250 °C), then HDPE.")
    assert ce.score(q, "Among HDPE, PEEK rod, 6061-T6 aluminium and PA6 nylon, PEEK wins.")
    assert not ce.score(q, "HDPE is highest; PEEK rod is second.")
    assert not ce.score(q, "HDPE, PEEK rod or PA6 nylon.")  # the list restated: no winner
    assert ce.score(q, "PEEK rod, PA6 nylon, HDPE.")  # a ranking, best first
    assert not ce.score(q, "[KB#mem_1] [Score: 0.9] PEEK rod")
    assert ce.aliases("6061-T6 aluminium") == ["6061-t6 aluminium", "6061-t6"]
    assert "pa6" in ce.aliases("PA6 nylon") and "peek" in ce.aliases("PEEK rod")


def test_bootstrap_takes_fractions_for_evidence_recall():
    low, high = ce.bootstrap_diff([1.0, 0.5, 1.0, 0.5], [0.5, 0.0, 0.5, 0.0])
    assert low == high == 0.5
    low, high = ce.bootstrap_diff([0.2, 0.9, 0.4, 0.7, 0.1], [0.3, 0.1, 0.5, 0.2, 0.4])
    assert low < 0.2 < high


def test_summary_gives_recall_cis_and_groups_wide_and_narrow():
    def row(kind, correct, recall):
        return {
            "question": f"{kind}{correct}{recall}",
            "kind": kind,
            "correct": correct,
            "recall": recall,
            "precision": 1.0,
            "gold_seen": 1.0,
            "support": 0.5,
            "unknown": 0,
            "parrot": False,
            "calls": 1,
            "prompt_tokens": 10,
            "output_tokens": 5,
            "wall_s": 1.0,
        }

    rows = {
        "single": [row("wide", False, 0.2), row("wide", False, 0.4), row("direct", True, 1.0)],
        "council-split": [row("wide", True, 0.8), row("wide", True, 0.6), row("direct", True, 1.0)],
    }
    grouped = ce.groups(rows)
    assert set(grouped) == {"all", "wide", "narrow"}
    wide = ce.summarise(grouped["wide"])["council-split"]
    assert wide["accuracy"] == 1.0 and wide["diff_vs_first_ci95"] == [1.0, 1.0]
    assert wide["citation_recall"] == 0.7 and wide["recall_diff_vs_first_ci95"][0] > 0
    assert wide["citation_support"] == 0.5
    assert "| council-split | 2 | 1.00 |" in ce.tables(rows)


def test_the_council_arm_reads_shared_evidence_and_council_split_splits(tmp_path):
    ctx = ce.context(tmp_path / "kb.sqlite", {"specialist": 8}, 3)
    assert ctx.evidence == "shared"  # `auto` would split the council arm at these windows
    assert "council" in ce.DEFAULT_ARMS and "council-split" in ce.DEFAULT_ARMS
