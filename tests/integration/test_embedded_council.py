"""The real embedded council (Qwen2.5-Coder 0.5B members, 1.5B judge, in process) end to end.

No scripted backend: the judge's `kb_search`/`kb_get` round is the 1.5B model's own Hermes
tool call parsed in process, and the peer-review rankings are the 0.5B model's JSON. Outputs are
capped small so the run takes a few minutes on two CPU cores.
"""

import os

import pytest

from collective.graph import CouncilContext, build_graph
from collective.models.registry import close_all

pytestmark = [
    pytest.mark.integration,
    # About 10 minutes of two real models on two CPU cores: `make real-council`, not `make test`.
    pytest.mark.skipif(
        not os.environ.get("COLLECTIVE_REAL_COUNCIL"),
        reason="the real Qwen council is slow; run it with make real-council",
    ),
]

QUESTION = "Which filament should I use for a part that sits in a hot car, and why?"


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    monkeypatch.delenv("COLLECTIVE_EMBEDDED_MODEL", raising=False)  # the real default models
    return CouncilContext(
        k=2,
        kb=str(tmp_path / "kb.sqlite"),
        output_caps={"planner": 48, "specialist": 128, "judge": 192},
        review=True,
        judge_tools=True,
        tool_rounds=1,
        temperature=0.0,  # greedy: the same tool call every run
        usage_log=None,
    )


@pytest.mark.timeout(1800)
async def test_the_embedded_council_runs_a_real_tool_round_and_parseable_reviews(ctx):
    try:
        out = await build_graph().ainvoke({"question": QUESTION}, context=ctx)
    finally:
        await close_all()
    models = {p["model"] for p in out["proposals"]}
    assert models == {"qwen2.5-coder-0.5b-instruct-q4_k_m"}
    assert all(p["error"] is None and p["text"] for p in out["proposals"])
    # the judge (1.5B) asked for KB tools itself, and they ran against the real KB
    assert out["tool_calls"], out.get("notes")
    assert {call["name"] for call in out["tool_calls"]} <= {"kb_search", "kb_get"}
    assert all(call["result_chars"] > 0 for call in out["tool_calls"])
    # every reviewer's JSON parsed into a full ranking of the other member
    assert len(out["rankings"]) == 2
    for ranking in out["rankings"]:
        assert ranking["error"] is None and len(ranking["order"]) == 1
    # a verdict, not the prompt echoed back; its citations were really supplied
    answer = out["answer"]
    assert answer.strip() and "You are the judge" not in answer
    assert out["citations"], answer  # resolved against the chunks the judge was given
    assert not out["unknown_citations"]
