"""`collective eval`'s run on scripted backends: arms share their calls, a stopped run resumes
without asking again, and a malformed question file is one error line naming the line."""

from __future__ import annotations

import json
import re

import pytest

from collective.evaluation import load_questions, run_eval
from collective.graph import CouncilContext
from collective.kb.store import Chunk
from collective.modes import run_arms
from tests.cli import one_error_line, run
from tests.fakes import ListStore, ScriptedBackend

ARMS = ["single", "self-consistency", "self-moa", "council", "council-split"]


class CountingStore(ListStore):
    def __init__(self, chunks):
        super().__init__(chunks)
        self.searches = 0

    def search(self, query, k):
        self.searches += 1
        return super().search(query, k)


def _member(messages) -> str:
    """Who answers, without a number the claim check would look for: `specialist A`."""
    found = re.search(r"You are specialist-(\d+)", str(messages))
    return f"specialist {chr(64 + int(found.group(1)))}" if found else "the judge"


def _context(store):
    def reply(messages):  # who answers on a line of its own: no claim for the check to read
        return f"PLA prints at 190-220 °C [KB#mem_a].\nAnswered by {_member(messages)}"

    best = ScriptedBackend("best", reply)
    members = [ScriptedBackend(f"s{i}", reply) for i in range(3)]
    ctx = CouncilContext(
        k=3, specialists=members, judge=best, knowledge=store, retrieval="lean", usage_log=None
    )
    return ctx, best, members


CHUNKS = [Chunk("mem_a", "PLA prints at 190-220 °C.", "a.md", score=0.9)]


async def test_arms_share_retrieval_and_samples_and_report_what_each_costs_alone():
    store = CountingStore(CHUNKS)
    ctx, best, members = _context(store)
    run_ = await run_arms("What nozzle temperature does PLA print at?", ARMS, ctx)
    # one retrieval for five arms; the best model: the judge's own answer once (single's, and
    # the one every judged arm weighs), then K-1 samples: with it, self-consistency's K
    assert store.searches == 1
    # the judge's prompt opens as the members' do: its own part tells them apart
    sampled = [c for c in best.calls if "You are the judge" not in c[-1]["content"]]
    assert len(sampled) == 2 and len(best.calls) == 3
    assert [len(m.calls) for m in members] == [2, 2, 2]  # council and council-split
    results = run_.results
    first = results["self-consistency"].proposals[0]
    assert first["member"] == "judge" and results["single"].answer == first["text"]
    assert [p["member"] for p in results["self-moa"].proposals] == [
        "specialist-1", "specialist-2"
    ]  # fmt: skip
    assert results["self-moa"].proposals == results["self-consistency"].proposals[1:]
    alone = {arm: r.calls for arm, r in results.items()}
    assert alone == {"single": 1, "self-consistency": 3, "self-moa": 3, "council": 4,
                     "council-split": 4}  # fmt: skip
    assert run_.calls == 9 == len(best.calls) + sum(len(m.calls) for m in members)
    assert run_.prompt_tokens < sum(r.prompt_tokens for r in results.values())
    assert all(r.output_tokens > 0 and r.prompt_tokens > 0 for r in results.values())


async def test_one_arm_alone_makes_only_its_own_calls():
    store = CountingStore(CHUNKS)
    ctx, best, members = _context(store)
    results = (await run_arms("PLA nozzle?", ["single"], ctx)).results
    assert len(best.calls) == 1 and not any(m.calls for m in members)
    assert results["single"].calls == 1


QUESTIONS = [
    {"id": "q1", "question": "What nozzle temperature does PLA print at?", "numbers": [190, 220]},
    {"id": "q2", "question": "PLA nozzle range?", "numbers": [190, 220], "gold_chunks": ["mem_a"]},
    {"id": "q3", "question": "Which is it, PLA?", "entity": "PLA"},
]


def _write(path, lines):
    path.write_text("".join(json.dumps(q) + "\n" for q in lines), encoding="utf-8")
    return path


async def test_a_run_stopped_after_the_first_question_resumes_without_asking_it_again(tmp_path):
    questions = load_questions(_write(tmp_path / "q.jsonl", QUESTIONS))
    gold = {"q1": [], "q2": ["mem_a"], "q3": []}
    rows = tmp_path / "rows.jsonl"
    ctx, best, _ = _context(CountingStore(CHUNKS))

    def stop(progress):
        raise KeyboardInterrupt  # Ctrl-C just after the first question was written

    with pytest.raises(KeyboardInterrupt):
        await run_eval(questions, ["single", "council"], ctx, rows, gold, stop)
    first = rows.read_text()
    assert [json.loads(line)["id"] for line in first.splitlines()] == ["q1"]
    with rows.open("a") as f:  # a line being written when the process died
        f.write('{"id": "q2", "quest')
    ctx, best, _ = _context(CountingStore(CHUNKS))
    seen = []
    out = await run_eval(questions, ["single", "council"], ctx, rows, gold, seen.append)
    assert [p.question.id for p in seen] == ["q2", "q3"] and [p.done for p in seen] == [2, 3]
    assert not any("What nozzle temperature" in str(c) for c in best.calls)
    assert any("PLA nozzle range" in str(c) for c in best.calls)
    # the cut line is kept (a newline appended after it, nothing truncated) and skipped
    text = rows.read_text()
    assert text.startswith(first + '{"id": "q2", "quest\n')
    assert [json.loads(x)["id"] for x in text.splitlines() if x != '{"id": "q2", "quest'] == [
        "q1", "q2", "q3"
    ]  # fmt: skip
    assert set(out) == {"q1", "q2", "q3"} and out["q2"]["arms"]["single"]["recall"] == 1.0
    # a third run with one more arm asks only that arm
    ctx, best, members = _context(CountingStore(CHUNKS))
    await run_eval(questions, ["single", "council", "self-consistency"], ctx, rows, gold)
    assert len(best.calls) == 3 * 3 and not any(m.calls for m in members)  # own + K-1, x3


async def test_rows_of_other_questions_are_refused(tmp_path):
    questions = load_questions(_write(tmp_path / "q.jsonl", QUESTIONS))
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "q1", "question": "Another text", "arms": {}}) + "\n")
    ctx, _, _ = _context(CountingStore(CHUNKS))
    with pytest.raises(Exception, match="rows.jsonl:1: question 'q1' reads differently"):
        await run_eval(questions, ["single"], ctx, rows, {"q1": [], "q2": [], "q3": []})


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"question": "Density of tin?", "numbers": [7.3]', "Expecting ','"),
        ('["Density of tin?"]', "a line must be a JSON object"),
        ('{"numbers": [7.3]}', "no `question`"),
        ('{"question": "Density of tin?"}', "no gold answer"),
        ('{"question": "Density of tin?", "numbers": ["7.3"]}', "`numbers` must be a list"),
        ('{"question": "Which?", "entity": "tin", "entities": ["lead", "zinc"]}', "not among"),
        ('{"question": "Density?", "numbers": [7], "gold": ["x"]}', "unknown key(s) ['gold']"),
        ('{"id": "q1", "question": "Again?", "numbers": [1]}', "also on line 1"),
        ('{"question": "Density?", "numbers": [NaN]}', "`numbers` must be finite"),
        ('{"question": "Density?", "numbers": [7.3, Infinity]}', "`numbers` must be finite"),
        ('{"question": "Density?", "numbers": [-Infinity]}', "`numbers` must be finite"),
        ('{"question": "Density?", "numbers": [1e999]}', "`numbers` must be finite"),
        ('{"question": "Density?", "numbers": [1' + "0" * 400 + "]}", "must be finite"),
    ],
)
def test_a_malformed_question_file_is_one_error_line_naming_the_line(
    clean_cwd, tmp_path, line, why
):
    path = tmp_path / "questions.jsonl"
    path.write_text(json.dumps(QUESTIONS[0]) + "\n\n" + line + "\n")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("")
    code, out, err = run(["eval", str(path), "--out", str(rows)])
    assert code == 2, err
    message = one_error_line(err)
    assert f"{path}:3: " in message and why in message, message
    assert rows.read_text() == ""  # nothing written


def test_an_unknown_arm_and_an_empty_file_are_usage_errors(clean_cwd, tmp_path):
    path = _write(tmp_path / "q.jsonl", [])
    code, _, err = run(["eval", str(path), "--arms", "single,councill"])
    assert code == 2 and "councill" in one_error_line(err)
    code, _, err = run(["eval", str(path), "--json"])
    assert code == 2 and "holds no question" in one_error_line(err)


def test_a_finished_rows_file_prints_the_table_without_asking_again(clean_cwd, tmp_path):
    questions = _write(tmp_path / "q.jsonl", [QUESTIONS[0], QUESTIONS[2]])
    rows = tmp_path / "rows.jsonl"
    row = {"answer": "PLA at 190-220 °C", "correct": True, "recall": None, "precision": None,
           "support": 1.0, "unknown": 0, "parrot": False, "calls": 1, "prompt_tokens": 9,
           "output_tokens": 3, "wall_s": 1.0}  # fmt: skip
    lines = [{"id": q["id"], "question": q["question"], "arms": {"single": row},
              "spent": {"calls": 1, "prompt_tokens": 9, "output_tokens": 3, "wall_s": 1.0}}
             for q in (QUESTIONS[0], QUESTIONS[2])]  # fmt: skip
    _write(rows, lines)
    before = rows.read_text()
    code, out, err = run(["eval", str(questions), "--out", str(rows), "--arms", "single", "--json"])
    assert code == 0, err
    summary = json.loads(out)
    assert summary["questions"] == 2 and summary["spent"]["calls"] == 2
    assert summary["groups"]["all"]["single"]["accuracy"] == 1.0  # both answers scored again
    assert rows.read_text() == before
    code, out, err = run(["eval", str(questions), "--out", str(rows), "--arms", "single"])
    assert code == 0 and "| single | 2 | 1.00 |" in out and "2 calls" in out


def _adaptive_context(logprobs: float | None):
    def reply(messages):
        return f"PLA prints at 190-220 °C [KB#mem_a].\nAnswered by {_member(messages)}"

    best = ScriptedBackend("best", reply, logprobs=logprobs)
    ctx = CouncilContext(
        k=3, specialists=[best], judge=best, knowledge=ListStore(CHUNKS), retrieval="lean",
        usage_log=None, confident_at=-0.5,
    )  # fmt: skip
    return ctx, best


async def test_adaptive_a_sure_own_answer_is_one_call():
    ctx, best = _adaptive_context(-0.1)
    run_ = await run_arms("What nozzle temperature does PLA print at?", ["adaptive"], ctx)
    got = run_.results["adaptive"]
    assert got.escalated is False and got.calls == 1 == len(best.calls) == run_.calls
    assert got.confidence["confidence"]["lowest"] == pytest.approx(-0.1)
    assert set(got.stages) == {"retrieval", "own"}


async def test_adaptive_an_unsure_own_answer_draws_the_samples_after_it():
    ctx, best = _adaptive_context(-3.0)
    run_ = await run_arms("What nozzle temperature does PLA print at?", ["adaptive"], ctx)
    got = run_.results["adaptive"]
    # the own answer, then K-1 samples, then the judge weighing them (its own answer kept)
    assert got.escalated is True and got.calls == 3 == len(best.calls) == run_.calls
    assert [p["member"] for p in got.proposals] == ["specialist-1", "specialist-2"]
    assert set(got.stages) == {"retrieval", "own", "members", "verdict"}
    # one after the other (each stage is reported rounded to 10 ms)
    assert got.wall_s >= got.stages["own"] + got.stages["members"] - 0.01


async def test_adaptive_beside_self_moa_shares_its_samples_and_verdict():
    ctx, best = _adaptive_context(-3.0)
    question = "What nozzle temperature does PLA print at?"
    run_ = await run_arms(question, ["single", "self-moa", "adaptive"], ctx)
    results = run_.results
    assert run_.calls == 3 == len(best.calls)  # nothing made twice
    assert results["adaptive"].answer == results["self-moa"].answer
    assert results["adaptive"].calls == results["self-moa"].calls == 3
    sure, _ = _adaptive_context(-0.1)
    shared = await run_arms(question, ["single", "self-moa", "adaptive"], sure)
    assert shared.results["adaptive"].answer == shared.results["single"].answer
    assert shared.results["adaptive"].calls == 1


async def test_vote_shares_self_consistencys_candidates_and_weighs_them():
    ctx, best = _adaptive_context(-0.2)
    question = "What nozzle temperature does PLA print at?"
    run_ = await run_arms(question, ["self-consistency", "vote"], ctx)
    assert run_.calls == 3 == len(best.calls)  # the own answer and two samples, once
    vote = run_.results["vote"]
    assert vote.calls == 3 and [p["member"] for p in vote.proposals][0] == "judge"
    assert vote.answer in {p["text"] for p in vote.proposals}
    assert vote.confidence["confidence"]["mean"] == pytest.approx(-0.2)


async def test_select_asks_the_best_model_which_candidate_the_others_agree_with():
    def reply(messages):
        if "most consistent" in messages[-1]["content"]:
            return '{"most_consistent": "Response B"}'
        return f"PLA prints at 190-220 °C [KB#mem_a].\nAnswered by {_member(messages)}"

    best = ScriptedBackend("best", reply)
    ctx = CouncilContext(k=3, specialists=[best], judge=best, knowledge=ListStore(CHUNKS),
                         retrieval="lean", usage_log=None)  # fmt: skip
    question = "What nozzle temperature does PLA print at?"
    run_ = await run_arms(question, ["self-consistency", "select"], ctx)
    got = run_.results["select"]
    # the own answer, two samples (shared with self-consistency), then the one pick
    assert run_.calls == 4 == len(best.calls) and got.calls == 4
    picked = best.calls[-1][-1]["content"]
    assert "Response A" in picked and "Response C" in picked  # the three, anonymised
    assert "Answered by specialist A" in got.answer  # Response B: the first sample
    assert set(got.stages) == {"retrieval", "own", "members", "select"}


async def test_select_falls_back_to_word_overlap_when_the_pick_is_not_a_label():
    def reply(messages):
        if "most consistent" in messages[-1]["content"]:
            return '{"most_consistent": "Response Z"}'
        return f"PLA prints at 190-220 °C [KB#mem_a].\nAnswered by {_member(messages)}"

    best = ScriptedBackend("best", reply)
    ctx = CouncilContext(k=3, specialists=[best], judge=best, knowledge=ListStore(CHUNKS),
                         retrieval="lean", usage_log=None)  # fmt: skip
    run_ = await run_arms("What nozzle temperature does PLA print at?", ["select"], ctx)
    assert run_.results["select"].answer  # the most consistent candidate stands
    assert run_.calls == 4


ROW = {"id": "q1", "question": QUESTIONS[0]["question"], "arms": {}, "spent": {}}


@pytest.mark.parametrize("last_newline", [False, True])
def test_the_question_file_given_as_out_is_refused_and_left_byte_identical(
    clean_cwd, tmp_path, last_newline
):
    # a mistake anyone makes; its last line (no newline: being written, as a cut row would be)
    # was truncated before the file was found to be no rows file
    path = tmp_path / "q.jsonl"
    asked = [QUESTIONS[0], QUESTIONS[2]]  # no gold chunks: no KB needed
    text = "\n".join(json.dumps(q) for q in asked) + ("\n" if last_newline else "")
    path.write_text(text, encoding="utf-8")
    code, _, err = run(["eval", str(path), "--out", str(path)])
    assert code == 2, err
    assert f"{path}:1 is not a row of `collective eval`; give --out a new file" in one_error_line(
        err
    )
    assert path.read_bytes() == text.encode()


NOT_ROWS = {  # files a user might name as --out by mistake, each without a final newline
    "notes": "# Notes\n\nPLA prints at 190-220 °C.\nPETG at 230-250 °C.",
    "one line": "remember to dry the nylon",
    "one question": json.dumps(QUESTIONS[0]),
    "json object": '{"arms": {}, "question": "no id"}',
    "json list": "[1, 2, 3]\n[4, 5]",
    "csv": "id,question\nq1,PLA?",
    "rows then prose": json.dumps(ROW) + "\nand then some prose",
    "prose then rows": "a heading\n" + json.dumps(ROW) + "\n" + json.dumps(ROW)[:20],
    "only a cut row": json.dumps(ROW)[:30],
    "cut rows, no row": json.dumps(ROW)[:30] + "\n" + json.dumps(ROW)[:25],
    "binary": "\x00\x01\x02\ufffd\x7f",
}


@pytest.mark.parametrize("name", list(NOT_ROWS))
def test_any_file_that_is_not_a_rows_file_is_never_changed(clean_cwd, tmp_path, name):
    questions = _write(tmp_path / "q.jsonl", QUESTIONS)
    out = tmp_path / "out.txt"
    out.write_text(NOT_ROWS[name], encoding="utf-8")
    before = out.read_bytes()
    code, _, err = run(["eval", str(questions), "--out", str(out), "--arms", "single"])
    assert code == 2, err
    message = one_error_line(err)
    assert str(out) in message and "give --out a new file" in message
    assert out.read_bytes() == before


async def test_a_rows_file_cut_mid_line_is_repaired_by_appending_once(tmp_path):
    from collective.evaluation.rows import read_rows

    questions = load_questions(_write(tmp_path / "q.jsonl", QUESTIONS))
    rows = tmp_path / "rows.jsonl"
    cut = json.dumps({**ROW, "id": "q2", "question": QUESTIONS[1]["question"]})[:33]
    rows.write_text(json.dumps(ROW) + "\n" + cut, encoding="utf-8")
    assert set(read_rows(rows, questions)) == {"q1"}
    assert rows.read_text() == json.dumps(ROW) + "\n" + cut + "\n"  # kept, ended: not cut off
    assert set(read_rows(rows, questions)) == {"q1"}  # read again: the cut line is skipped
    assert rows.read_text().count("\n") == 2
