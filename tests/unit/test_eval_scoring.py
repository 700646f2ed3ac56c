"""collective.evaluation without models: the bundled set, the scoring, the bootstrap, the table."""

import sys
from pathlib import Path

import pytest

from collective.evaluation.questions import EvalQuestion, load_questions, resolve_gold
from collective.evaluation.report import summarise, table
from collective.evaluation.scoring import aliases, bootstrap_diff, score
from collective.kb.sqlite_store import SqliteKnowledgeStore

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
sys.path.insert(0, str(REPO / "bench"))

import council_eval as ce  # noqa: E402


@pytest.fixture(scope="module")
def bundled():
    return load_questions(ce.QUESTIONS)


@pytest.fixture(scope="module")
def eval_kb(tmp_path_factory):
    store = SqliteKnowledgeStore(tmp_path_factory.mktemp("kb") / "eval.sqlite")
    store.add_paths([DATA / "eval_kb"], base=DATA)
    chunks = store.list()
    store.close()
    return chunks


def test_the_bundled_file_is_what_the_fact_tables_make():
    assert ce.QUESTIONS.read_text(encoding="utf-8") == ce.jsonl(ce.build_questions())


def test_the_set_is_large_mixed_and_grounded_in_real_chunks(bundled, eval_kb):
    assert len(bundled) == 113 and len({q.id for q in bundled}) == len(bundled)
    kinds = {k: sum(q.kind == k for q in bundled) for k in ("direct", "paraphrase", "comparison")}
    assert min(kinds.values()) >= 15, kinds
    gold = resolve_gold(bundled, eval_kb, ce.QUESTIONS)
    ids = {c.id for c in eval_kb}
    for q in bundled:
        assert gold[q.id] and set(gold[q.id]) <= ids
        assert len(gold[q.id]) == len(q.gold_chunks)  # one chunk per ref
        assert q.numbers or (q.entity and q.entities)


def test_gold_answers_come_from_the_fact_tables(bundled):
    by_id = {q.id: q for q in bundled}
    assert by_id["density-6061_t6_aluminium"].numbers == (2.7,)
    assert by_id["nozzle-pla"].numbers == (190, 220)
    assert by_id["janka-white_oak"].numbers == (1360,)


def test_scoring_needs_every_number_and_refuses_parrots():
    q = EvalQuestion("q", "nozzle for PLA?", numbers=(190, 220))
    assert score(q, "Print PLA at 190–220 °C [KB#mem_1].")
    assert score(q, "Between 190 and 220 degrees.")
    assert not score(q, "About 200 °C.")
    assert not score(q, "[KB#mem_1] [Score: 0.91] Print temperatures: 190-220 °C")
    assert not score(q, "You are the judge of a council... 190-220")
    assert not score(EvalQuestion("d", "?", numbers=(1360,)), "1,350 lbf")
    assert score(EvalQuestion("d", "?", numbers=(1360,)), "about 1,360 lbf")


def test_comparisons_need_the_winner_named_first():
    q = EvalQuestion(
        "c", "denser?", entity="C110 copper", entities=("O1 tool steel", "C110 copper")
    )
    assert score(q, "C110 copper is denser than O1 tool steel.")
    assert score(q, "c110 copper (8.96 g/cm3).")
    assert not score(q, "O1 tool steel is lighter than C110 copper... ")
    assert not score(q, "Neither.")
    # restating the pair names no winner; the conclusion does
    assert not score(q, "Between C110 copper and O1 tool steel, O1 tool steel is denser.")
    assert score(q, "Comparing C110 copper or O1 tool steel: C110 copper is denser.")


def test_a_citation_tags_digits_are_not_figures():
    # what the first bundled run credited: machining lines for "which is denser", the winner's
    # figure found in the hex of a tag
    q = EvalQuestion(
        "c", "denser?", numbers=(8.0,), entity="316 stainless steel",
        entities=("316 stainless steel", "1018 mild steel"),
    )  # fmt: skip
    machining = (
        "- Machining 316 stainless steel: work-hardens [KB#mem_d3427e711bd0a813].\n"
        "- Machining 1018 mild steel: machines well [KB#mem_61540dc8e2117255]."
    )
    assert not score(q, machining)
    assert score(q, "316 stainless steel has a density of about 8.00 g/cm3 [KB#mem_fb5d1c9].")


def test_the_bundled_comparisons_ask_for_the_winners_figure(bundled):
    picked = [q for q in bundled if q.kind in ("comparison", "wide")]
    assert picked and all(len(q.numbers) == 1 and q.entity for q in picked)
    by_id = {q.id: q for q in bundled}
    assert by_id["denser-c110_copper-vs-o1_tool_steel"].numbers == (8.96,)


def test_wide_answers_need_the_winner_named_first_restated_lists_aside():
    q = EvalQuestion(
        "w", "?", entity="PEEK rod", entities=("HDPE", "PEEK rod", "6061-T6 aluminium", "PA6 nylon")
    )
    assert score(q, "PEEK rod, at 250 °C [KB#mem_1].")
    assert score(q, "peek is the highest (250 °C), then HDPE.")
    assert score(q, "Among HDPE, PEEK rod, 6061-T6 aluminium and PA6 nylon, PEEK wins.")
    assert not score(q, "HDPE is highest; PEEK rod is second.")
    assert not score(q, "HDPE, PEEK rod or PA6 nylon.")  # the list restated: no winner
    assert score(q, "PEEK rod, PA6 nylon, HDPE.")  # a ranking, best first
    assert not score(q, "[KB#mem_1] [Score: 0.9] PEEK rod")
    assert aliases("6061-T6 aluminium") == ["6061-t6 aluminium", "6061-t6"]
    assert "pa6" in aliases("PA6 nylon") and "peek" in aliases("PEEK rod")


def test_an_entity_alone_and_strings_must_be_stated():
    q = EvalQuestion("e", "Which filament for a hot car?", entity="ASA", strings=("UV",))
    assert score(q, "ASA: it resists heat and UV.")
    assert not score(q, "ASA resists heat.")  # the string is missing
    assert not score(q, "PETGASA resists UV.")  # not the name as a word
    assert score(EvalQuestion("s", "?", strings=("Glass Transition",)), "its glass transition")


def test_wide_questions_rank_5_to_10_entities_with_a_unique_winner_and_every_gold_chunk(bundled):
    wide = [q for q in bundled if q.kind == "wide"]
    assert len(wide) >= 20
    for q in wide:
        assert 5 <= len(q.entities) <= 10 and q.entity in q.entities
        assert len(q.gold_chunks) == len(set(q.gold_chunks)) == len(q.entities)
        assert all(name in q.question for name in q.entities)
    for q in wide:  # the winner from the fact table, e.g. PTFE's 260 °C service
        if q.id.startswith("hottest-plastic") and "PTFE" in q.entities:
            assert q.entity == "PTFE"


def test_paired_bootstrap_interval():
    a = [True] * 8 + [False] * 2
    assert bootstrap_diff(a, a) == (0, 0)
    assert bootstrap_diff([True] * 10, [False] * 10) == (1, 1)
    low, high = bootstrap_diff(a, [True] * 5 + [False] * 5)
    assert low <= 0.3 <= high and low < high
    assert bootstrap_diff([1.0, 0.5, 1.0, 0.5], [0.5, 0.0, 0.5, 0.0]) == (0.5, 0.5)
    low, high = bootstrap_diff([0.2, 0.9, 0.4, 0.7, 0.1], [0.3, 0.1, 0.5, 0.2, 0.4])
    assert low < 0.2 < high


def test_subset_spreads_over_kinds():
    kinds = {q.kind for q in ce.subset(ce.build_questions(), 5)}
    assert kinds == {"direct", "paraphrase", "comparison", "wide"}


def _row(answer, recall, calls=1):
    return {"answer": answer, "correct": None, "recall": recall, "precision": 1.0, "support": 0.5,
            "unknown": 0, "parrot": False, "calls": calls, "prompt_tokens": 10,
            "output_tokens": 5, "wall_s": 1.0}  # fmt: skip


def test_summary_scores_again_gives_cis_against_single_and_groups_by_kind():
    questions = [
        EvalQuestion("w1", "?", entity="A", entities=("A", "B"), kind="wide"),
        EvalQuestion("w2", "?", entity="B", entities=("A", "B"), kind="wide"),
        EvalQuestion("d1", "?", numbers=(7,), kind="direct"),
    ]
    rows = {
        "w1": {"arms": {"council-split": _row("A", 0.8, 4), "single": _row("B", 0.2)}},
        "w2": {"arms": {"council-split": _row("B", 0.6, 4), "single": _row("A", 0.4)}},
        "d1": {"arms": {"council-split": _row("7", 1.0, 4), "single": _row("7", 1.0)}},
    }
    for r in rows.values():
        r["spent"] = [{"calls": 5, "prompt_tokens": 20, "output_tokens": 10, "wall_s": 2.0}]
    summary = summarise(questions, rows, ["council-split", "single"])
    assert summary["baseline"] == "single" and summary["questions"] == 3
    assert set(summary["groups"]) == {"all", "wide", "direct"}
    wide = summary["groups"]["wide"]["council-split"]
    assert wide["accuracy"] == 1.0 and wide["accuracy_diff_ci95"] == [1.0, 1.0]
    assert wide["evidence_recall"] == 0.7 and wide["recall_diff_ci95"][0] > 0
    assert wide["claims_supported"] == 0.5 and wide["calls_per_q"] == 4
    assert summary["groups"]["all"]["single"]["accuracy_diff_ci95"] == [0, 0]
    assert summary["spent"]["calls"] == 15
    text = table(summary)
    assert "| council-split | 2 | 1.00 | [+1.00, +1.00] |" in text and "15 calls" in text


def test_gold_refs_resolve_by_id_or_source_and_heading_and_name_the_line(eval_kb, tmp_path):
    chunk = next(c for c in eval_kb if c.heading.endswith("Print temperatures"))
    tail = chunk.source.split("/", 1)[1]  # the path without its first folder
    q = EvalQuestion("g", "?", numbers=(1,), gold_chunks=(chunk.id, f"{tail}#Print temperatures"))
    assert resolve_gold([q], eval_kb, tmp_path / "q.jsonl") == {"g": [chunk.id]}
    bad = EvalQuestion("b", "?", numbers=(1,), gold_chunks=("nowhere.md#Nothing",), line=4)
    with pytest.raises(Exception, match=r"q\.jsonl:4: gold chunk 'nowhere\.md#Nothing'"):
        resolve_gold([bad], eval_kb, tmp_path / "q.jsonl")
