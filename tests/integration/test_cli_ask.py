"""`collective ask` and `collective chat` on the real embedded model (llama.cpp in process).

Small output caps and k = 1 or 2 keep each council run to seconds on two CPU cores.
"""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collective.cli import app

pytestmark = pytest.mark.integration
KEEP_ENV = ("COLLECTIVE_CACHE", "COLLECTIVE_EMBEDDED_MODEL")  # model cache, fast test model

REPO = Path(__file__).resolve().parents[2]
QUESTION = "Which filament should I use for a part that sits in a hot car, and why?"


@pytest.fixture
def workdir(tmp_path, monkeypatch, gguf_path):
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name not in KEEP_ENV:
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "collective.toml").write_text(
        'k = 1\nplanner = "embedded"\n'  # the plan's path too (no planner is the default)
        "[output_caps]\nplanner = 16\nspecialist = 48\njudge = 48\nchat = 32\n"
    )
    return tmp_path


def ask_json(*args):
    result = CliRunner().invoke(app, ["ask", *args, "--json"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1  # exactly one JSON object and nothing else on stdout
    return json.loads(lines[0])


def test_json_output_has_the_design_contract(workdir):
    out = ask_json(QUESTION, "--k", "2", "--retrieval", "balanced")
    assert isinstance(out["answer"], str)
    for citation in out["citations"]:
        assert set(citation) == {"id", "source"}
    assert isinstance(out["unknown_citations"], list)
    assert [p["member"] for p in out["proposals"]] == ["specialist-1", "specialist-2"]
    for proposal in out["proposals"]:
        assert {"member", "model", "text", "citations", "error"} <= set(proposal)
        assert proposal["model"] == "gemma-3-270m-q4_k_m"
    fix = ["judge"] if "revised" in out["claim_check"] else []  # the call that fixed claims
    # in the order the calls finished: the judge drafts beside the specialists
    assert sorted(b["node"] for b in out["budgets"]) == sorted(
        ["plan", "specialist-1", "specialist-2", "judge", *fix]
    )
    for budget in out["budgets"]:
        assert {
            "node",
            "model",
            "n_ctx",
            "prompt_tokens",
            "max_output_tokens",
            "token_counter",
            "sections",
        } <= set(budget)
        assert budget["prompt_tokens"] + budget["max_output_tokens"] <= budget["n_ctx"]
        assert budget["token_counter"] == "exact:llama.cpp"
        assert all({"name", "allocated", "used"} <= set(s) for s in budget["sections"])
    caps = {"plan": 16, "specialist-1": 48, "specialist-2": 48, "judge": 48}
    assert {b["node"]: b["max_output_tokens"] for b in out["budgets"]} == caps
    retrieval = out["retrieval"]
    assert retrieval["requested"] == "balanced" and retrieval["applied"] == "balanced"
    assert retrieval["candidates"] > 0 and len(retrieval["injected"]) > 0
    assert {"retrieve_ms", "plan_ms", "judge_ms", "total_ms"} <= set(out["timings"])
    # The default KB is the demo KB, seeded into the working directory on first use.
    assert (workdir / ".collective" / "kb.sqlite").is_file()


def test_human_output_shows_verdict_budgets_and_timings(workdir):
    result = CliRunner().invoke(app, ["ask", QUESTION])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "verdict" in out
    for node in ("plan", "specialist-1", "judge"):
        assert node in out
    assert "exact:llama.cpp" in out and "32,768" in out and "kb_chunks" in out
    assert "timings: retrieve" in out and "total" in out
    assert "continue with --thread" in out
    # The live progress view went to stderr, each node finished.
    assert "specialist-1" in result.stderr and "done" in result.stderr


def test_a_thread_carries_the_conversation_into_the_next_question(workdir):
    ask_json(QUESTION, "--thread", "t1")
    ask_json("And for a part outdoors in the sun?", "--thread", "t1")
    from langgraph.checkpoint.sqlite import SqliteSaver

    from collective.graph import build_graph

    with SqliteSaver.from_conn_string(str(workdir / ".collective/checkpoints.sqlite")) as saver:
        state = build_graph(checkpointer=saver).get_state({"configurable": {"thread_id": "t1"}})
    turns = state.values["memory"]["turns"]
    questions = [t["text"] for t in turns if t["role"] == "user"]
    assert questions == [QUESTION, "And for a part outdoors in the sun?"]
    # The second run's prompts carried the first question as conversation.
    assert "hot car" in state.values["conversation"]


def pending_nodes(db, thread):
    from langgraph.checkpoint.sqlite import SqliteSaver

    from collective.graph import build_graph

    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        return (
            build_graph(checkpointer=saver).get_state({"configurable": {"thread_id": thread}}).next
        )
    finally:
        conn.close()


def test_ctrl_c_keeps_the_checkpoint_and_thread_resumes_it(workdir):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "collective.cli", "ask", QUESTION, "--k", "2", "--thread", "cc"]
    proc = subprocess.Popen(
        argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    db = str(workdir / ".collective" / "checkpoints.sqlite")
    deadline = time.monotonic() + 120
    # Wait until the plan is checkpointed and the specialists are under way.
    while time.monotonic() < deadline:
        if os.path.exists(db):
            try:
                if "specialist" in pending_nodes(db, "cc"):
                    break
            except sqlite3.OperationalError:
                pass
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the run never reached the specialists")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "interrupted (Ctrl-C)" in err and "collective ask --thread cc" in err
    assert out == ""
    assert pending_nodes(db, "cc")  # the checkpoint is kept

    resumed = ask_json("--thread", "cc")
    assert resumed["question"] == QUESTION
    nodes = [b["node"] for b in resumed["budgets"]]
    assert nodes.count("plan") == 1 and "judge" in nodes
    assert {p["member"] for p in resumed["proposals"]} == {"specialist-1", "specialist-2"}
    # The plan ran once across both processes: the usage log has one plan call.
    log = (workdir / ".collective" / "usage.jsonl").read_text().splitlines()
    assert sum(json.loads(line)["agent"] == "plan" for line in log) == 1
    assert not pending_nodes(db, "cc")


def test_chat_with_scripted_input_and_resume(workdir):
    script = (
        "\n".join(
            [
                "/help",
                "Hello! Which filament is easiest to print?",
                "/budget",
                "/memory",
                "/nonsense",
                "/collective Which filament should I use for a part in a hot car?",
                "/budget",
                "/exit",
            ]
        )
        + "\n"
    )
    result = CliRunner().invoke(app, ["chat", "--thread", "c1"], input=script)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "collective chat · thread c1" in out
    assert "/collective QUERY" in out  # /help
    assert "gemma-3-270m-q4_k_m>" in out  # a chat reply
    assert "last turn's budgets" in out and "conversation_summary" in out
    assert "L0" in out and "L1" in out and "L2" in out  # /memory
    assert "unknown command /nonsense" in out
    assert "verdict" in out  # the council ran
    budget_tables = out.split("last turn's budgets")
    assert "chat" in budget_tables[1] and "judge" in budget_tables[2]
    assert "resume with `collective chat --thread c1`" in out

    again = CliRunner().invoke(app, ["chat", "--thread", "c1"], input="/memory\n")
    assert again.exit_code == 0, again.output
    assert "resumed with" in again.stdout
    turns_line = next(line for line in again.stdout.splitlines() if "turns in L0" in line)
    assert int(turns_line.split()[0]) >= 4  # two chat turns + the council's question and verdict


def _confident(confidence):
    assert confidence["tokens"] > 0
    assert confidence["lowest"] <= confidence["mean"] <= 0.0


def test_json_carries_each_answers_confidence(workdir):
    out = ask_json(QUESTION, "--k", "2")
    _confident(out["confidence"])  # the judge's own answer's
    assert "confidence_note" not in out
    for proposal in out["proposals"]:
        if proposal["error"] is None:
            _confident(proposal["confidence"])


def test_ask_mode_adaptive_draws_samples_only_when_unsure(workdir):
    (workdir / "sure.toml").write_text(
        (workdir / "collective.toml").read_text().replace("k = 1", "k = 2\nconfident_at = -100.0")
    )
    sure = ask_json(QUESTION, "--mode", "adaptive", "--config", "sure.toml")
    _confident(sure["confidence"])
    assert sure["proposals"] == []
    assert any("no sample was drawn" in note for note in sure["notes"])
    (workdir / "unsure.toml").write_text(
        (workdir / "collective.toml").read_text().replace("k = 1", "k = 2\nconfident_at = 0.0")
    )
    unsure = ask_json(QUESTION, "--mode", "adaptive", "--config", "unsure.toml")
    assert [p["member"] for p in unsure["proposals"]] == ["specialist-1"]  # K-1 samples
    assert any("samples were weighed" in note for note in unsure["notes"])


def test_ask_modes_vote_and_select_on_the_real_model(workdir):
    (workdir / "two.toml").write_text(
        (workdir / "collective.toml").read_text().replace("k = 1", "k = 2")
    )
    for mode in ("vote", "select"):
        out = ask_json(QUESTION, "--mode", mode, "--config", "two.toml")
        assert [p["member"] for p in out["proposals"]] == ["judge", "specialist-1"]
        # the answer given is one of the candidates: its confidence is that candidate's
        assert out["confidence"] in [p["confidence"] for p in out["proposals"]]
        calls = int(out["notes"][0].split(": ")[1].split()[0])
        # the own answer (and its fix where a claim failed), one sample; select's pick
        assert calls >= (3 if mode == "select" else 2)
