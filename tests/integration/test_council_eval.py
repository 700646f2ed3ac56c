"""The council evaluation harness end to end on a real model: 5 questions, every arm.

Runs on the fast gemma model (tests/conftest.py): this checks the harness (arms, call counts,
scoring, the bootstrap and the table), not the models; `make eval` measures the real council.
"""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import council_eval as ce  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.mark.timeout(1800)
def test_five_questions_through_every_arm(capsys, tmp_path, gguf_path):
    rows = tmp_path / "rows.jsonl"
    ce.main(
        ["--questions", "5", "--k", "2", "--specialist-cap", "8", "--judge-cap", "8"]
        + ["--rows", str(rows), "--json"]
    )
    out = json.loads(capsys.readouterr().out)
    assert out["questions"] == 5
    summary = out["summary"]["all"]
    assert list(summary) == ce.DEFAULT_ARMS
    # equal calls: K+1 for arms 2-5 (plus the judge's fix of a claim its chunk does not
    # support, where one was needed), one for single
    calls = {arm: s["calls_per_q"] for arm, s in summary.items()}
    assert calls["single"] == 1 and calls["self-consistency"] == 3
    assert all(3 <= calls[arm] <= 4 for arm in ("self-moa", "council", "council-split"))
    for arm, s in summary.items():
        assert s["n"] == 5
        low, high = s["diff_vs_first_ci95"]
        assert -1 <= low <= high <= 1
        assert 0 <= s["citation_precision"] <= 1 and 0 <= s["citation_recall"] <= 1
        assert 0 <= s["gold_seen"] <= 1
        assert s["prompt_tokens_per_q"] > 0 and s["output_tokens_per_q"] > 0
    assert summary["single"]["diff_vs_first_ci95"] == [0, 0]
    # the rows file holds every row, and summarises to the same figures
    assert len(rows.read_text().splitlines()) == 25
    again = ce.summarise(ce.completed(rows))
    assert {a: s["accuracy"] for a, s in again.items()} == {  # same figures again
        a: s["accuracy"] for a, s in summary.items()
    }


def test_ask_runs_the_single_mode(tmp_path, monkeypatch, gguf_path):
    from typer.testing import CliRunner

    from collective.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "collective.toml").write_text("k = 2\n[output_caps]\nspecialist = 16\n")
    question = "Which filament should I use for a part that sits in a hot car?"
    result = CliRunner().invoke(app, ["ask", question, "--mode", "single", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["notes"] == ["mode single: 1 model calls, no council graph"]
    assert [p["member"] for p in out["proposals"]] == ["specialist-1"]
    assert out["answer"] == out["proposals"][0]["text"]
    assert all(set(c) == {"id", "source"} for c in out["citations"])
