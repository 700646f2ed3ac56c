"""`collective eval` end to end on real models: in process (the embedded small gemma) and
against a real llama-server, on a three-question file of the bundled set; Ctrl-C after the
first question, then the same command again, finishes without asking it again.

These check the command (arms, shared calls, scoring, the table, resuming), not the models:
`make eval` measures the real council.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli import run

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ARMS = ["single", "self-consistency", "self-moa", "council", "council-split"]
SMALL = """
k = 2
retrieval = "lean"
[output_caps]
specialist = 8
judge = 8
"""


@pytest.fixture
def three(tmp_path: Path) -> Path:
    """Three questions of the bundled set (a lookup, a comparison, a wide one) and its KB."""
    lines = (REPO / "tests" / "data" / "eval_questions.jsonl").read_text().splitlines()
    kinds = ["direct", "comparison", "wide"]
    picked = [next(x for x in lines if json.loads(x)["kind"] == k) for k in kinds]
    (tmp_path / "q.jsonl").write_text("\n".join(picked) + "\n")
    code, _, err = run(["kb", "add", str(REPO / "tests" / "data" / "eval_kb"),
                        "--kb", str(tmp_path / "kb.sqlite")])  # fmt: skip
    assert code == 0, err
    return tmp_path


def _check(out: dict, rows: Path) -> None:
    assert out["questions"] == 3 and out["baseline"] == "single"
    summary = out["groups"]["all"]
    assert list(summary) == ARMS and set(out["groups"]) == {"all", "direct", "comparison", "wide"}
    calls = {arm: s["calls_per_q"] for arm, s in summary.items()}
    # alone: the judge's own answer (one call, and a fix of an unsupported claim), then K-1
    # samples (self-consistency's K answers count the own one) or K members; a call whose
    # answers are bullets alone is asked once more (at most once a call: `_asked_again`)
    assert 1 <= calls["single"] <= 2
    more = {arm: calls[arm] - calls["single"] for arm in ARMS}
    assert all(1 <= more[arm] <= 2 for arm in ("self-consistency", "self-moa")), calls
    assert all(2 <= more[arm] <= 4 for arm in ("council", "council-split")), calls
    assert summary["single"]["accuracy_diff_ci95"] == [0, 0]
    for s in summary.values():
        assert s["n"] == 3 and 0 <= s["evidence_recall"] <= 1
        assert s["prompt_tokens_per_q"] > 0 and s["output_tokens_per_q"] > 0
    # adaptive, replayed from single and self-moa with the own answers' confidence: the
    # threshold chosen on the first and third questions, reported on the second
    tuned = out["adaptive_threshold"]
    assert tuned["tuning"]["n"] == 2 and tuned["test"]["n"] == 1
    # shared: the judge's answer serves every arm, 2 samples two arms; 2 council members twice
    assert out["spent"]["calls"] < 3 * sum(calls.values())
    assert [json.loads(x)["id"] for x in rows.read_text().splitlines()] == [
        json.loads(x)["id"] for x in (rows.parent / "q.jsonl").read_text().splitlines()
    ]


@pytest.mark.timeout(1800)
def test_eval_in_process_on_three_questions(clean_cwd, three, gguf_path):
    (three / "c.toml").write_text(SMALL)
    rows = three / "rows.jsonl"
    args = ["eval", str(three / "q.jsonl"), "--config", str(three / "c.toml"),
            "--kb", str(three / "kb.sqlite"), "--out", str(rows)]  # fmt: skip
    code, out, err = run([*args, "--json"])
    assert code == 0, err
    _check(json.loads(out), rows)
    assert err.count("[") >= 3 and "left" in err  # progress with the time left
    code, text, err = run(args)  # everything is in the rows file: nothing asked again
    assert code == 0, err and "[" not in err
    assert "| council | 3 |" in text and "spent" in text


@pytest.mark.timeout(1800)
def test_eval_on_llama_server_resumes_after_ctrl_c(three, llama_server):
    server = f"llama-server:{llama_server.url}"
    config = f'planner = "{server}"\njudge = "{server}"\n{SMALL}'
    config += f'[[specialists]]\nbackend = "{server}"\ncount = 2\n'
    (three / "c.toml").write_text(config)
    rows = three / "rows.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("COLLECTIVE_CONFIG", "COLLECTIVE_KB")}
    argv = [sys.executable, "-m", "collective.cli", "eval", str(three / "q.jsonl"),
            "--config", str(three / "c.toml"), "--kb", str(three / "kb.sqlite"),
            "--out", str(rows)]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=three, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not (rows.exists() and rows.read_text().strip()):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)  # Ctrl-C with the second question in flight
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "run the same command again to continue" in err.splitlines()[-1]
    kept = rows.read_text()
    assert 1 <= len(kept.splitlines()) < 3
    done = subprocess.run([*argv, "--json"], cwd=three, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert rows.read_text().startswith(kept)  # the first question was not asked again
    _check(json.loads(done.stdout), rows)
    first = json.loads(kept.splitlines()[0])["id"]
    assert f"] {first}:" not in done.stderr
