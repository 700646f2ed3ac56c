"""Budget plans and the sections each role needs: refused with the section named, or working.

Issue 11, point 1: plans that lacked `task` or `system`, or `budgets.judge = "specialist"`,
passed config validation and then raised `KeyError` inside a node.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from collective.budget.plans import REVIEWER_PRESET, ModelBudget
from collective.cli import main
from collective.config import load_config
from collective.errors import ConfigError
from collective.graph import CouncilContext, build_graph
from collective.kb.store import Chunk
from tests.fakes import ScriptedBackend

pytestmark = pytest.mark.usefixtures("clean_cwd")

REFUSED = [
    ('[budgets]\njudge = "specialist"', "budgets.judge", "'proposals'"),
    ('[budgets]\njudge = "planner"', "budgets.judge", "'proposals'"),
    (
        "[budgets.specialist]\nn_ctx = 4096\noutput = 512\nsections = { system = 500 }",
        "budgets.specialist",
        "'task'",
    ),
    (
        "[budgets.planner]\nn_ctx = 4096\noutput = 512\nsections = { task = 500 }",
        "budgets.planner",
        "'system'",
    ),
    (
        "[budgets.judge]\nn_ctx = 8192\noutput = 512\nsections = { system = 500, task = 500 }",
        "budgets.judge",
        "'proposals'",
    ),
]


@pytest.mark.parametrize(("text", "where", "section"), REFUSED)
def test_a_plan_without_a_section_its_role_needs_is_refused_by_name(
    tmp_path, text, where, section
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert where in str(caught.value) and section in str(caught.value)


def test_ask_json_prints_the_error_object_for_such_a_plan(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[budgets]\njudge = "specialist"')
    runner = CliRunner()
    with runner.isolation() as streams:
        with pytest.raises(SystemExit) as exited:
            main(["ask", "Which filament?", "--json", "--config", str(path)])
        out, err = streams[0].getvalue().decode(), streams[1].getvalue().decode()
    assert exited.value.code == 2
    payload = json.loads(out)
    assert payload["error"]["type"] == "ConfigError"
    assert "proposals" in payload["error"]["message"]
    assert "internal error" not in err and "Traceback" not in err


class OneChunkStore:
    def __init__(self) -> None:
        self.chunk = Chunk("mem_asa", "ASA resists UV.", "asa.md", score=0.9)

    def search(self, query: str, k: int) -> list[Chunk]:
        return [self.chunk]

    def get(self, chunk_id: str) -> Chunk | None:
        return self.chunk if chunk_id == self.chunk.id else None


async def test_accepted_plans_without_kb_or_evidence_sections_run_the_council() -> None:
    """`budgets.judge = "reviewer"` (no kb_chunks, no evidence) used to raise KeyError."""
    bare_specialist = ModelBudget(
        "bare", 32_768, 2_000, 500, {"system": 1_000, "task": 1_000}
    )  # no kb_chunks, no conversation_summary, no safety margin
    judge = ScriptedBackend("judge", "ASA [KB#mem_asa].")
    ctx = CouncilContext(
        k=1,
        planner=ScriptedBackend("planner", "Plan."),
        specialists=[ScriptedBackend("spec", "ASA [KB#mem_asa].")],
        judge=judge,
        knowledge=OneChunkStore(),
        retrieval="balanced",
        judge_tools=False,
        budgets={"judge": REVIEWER_PRESET, "specialist": bare_specialist, "planner": "reviewer"},
    )
    out = await build_graph().ainvoke({"question": "ASA?"}, context=ctx)
    # Neither model was shown the chunk, so neither citation resolves: both are reported.
    assert out["proposals"][0]["citations"] == []
    assert out["proposals"][0]["unknown_citations"] == ["mem_asa"]
    assert out["citations"] == [] and out["unknown_citations"] == ["mem_asa"]
    assert "[KB#mem_asa]" not in "\n".join(m["content"] for m in judge.calls[0][1:])


async def test_a_library_callers_plan_is_checked_like_a_configs() -> None:
    ctx = CouncilContext(
        k=1,
        planner=ScriptedBackend("planner", "Plan."),
        specialists=[ScriptedBackend("spec", "A.")],
        judge=ScriptedBackend("judge", "V."),
        knowledge=OneChunkStore(),
        retrieval="balanced",
        judge_tools=False,
        budgets={"judge": "specialist"},
    )
    with pytest.raises(ConfigError, match="proposals"):
        await build_graph().ainvoke({"question": "ASA?"}, context=ctx)
