"""The council on the real embedded model (llama.cpp in process, gemma 270M) over the demo KB."""

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from collective.graph import CouncilContext, build_graph

pytestmark = pytest.mark.integration


@pytest.fixture
def ctx(tmp_path, gguf_path):
    return CouncilContext(
        k=2,
        planner="embedded",  # the plan's path too (no planner is the default)
        kb=str(tmp_path / "kb.sqlite"),
        output_caps={"planner": 48, "specialist": 96, "judge": 128},
        usage_log=str(tmp_path / "usage.jsonl"),
        temperature=0.0,  # greedy: the same answer every run
    )


async def test_a_real_council_answers_with_exact_budgets(ctx, tmp_path):
    graph = build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "real"}}
    out = await graph.ainvoke(
        {"question": "Which filament survives a hot car, and why?"}, config, context=ctx
    )
    # what greedy gemma writes is its own: the run guarantees a verdict, and each member's
    # proposal or the reason it has none (a member that stops at once wrote nothing)
    assert isinstance(out["answer"], str)
    assert len(out["proposals"]) == 2
    assert all(p["error"] is None or "wrote nothing" in p["error"] for p in out["proposals"])
    assert out["retrieval"]["injected"], "the demo KB should have matched"
    # Hybrid retrieval: the seeded demo KB carries vectors and both sides found chunks.
    assert out["retrieval"]["dense"]["used"] is True
    sides = out["retrieval"]["chunks"]
    assert any(c["dense_rank"] for c in sides) and any(c["lexical_rank"] for c in sides)
    # one judge call more where it had to fix a cited claim its chunk does not support
    fix = ["judge"] if "revised" in out["claim_check"] else []  # the call that fixed claims
    # in the order the calls finished: the judge drafts beside the specialists
    assert sorted(b["node"] for b in out["budgets"]) == sorted(
        ["plan", "specialist-1", "specialist-2", "judge", *fix]
    )
    for budget in out["budgets"]:
        assert budget["token_counter"] == "exact:llama.cpp"
        assert budget["n_ctx"] == 32_768
        assert budget["prompt_tokens"] + budget["max_output_tokens"] <= budget["n_ctx"]
    judge = out["budgets"][-1]
    assert "scaled" in judge["scaled"]  # the 128K judge preset, scaled to the real 32K
    # every id the verdict cited is either resolved to a supplied chunk or reported unknown
    supplied = {c["id"] for c in out["retrieval"]["chunks"]}
    assert {c["id"] for c in out["citations"]} <= supplied
    # one usage-log line per model call
    assert len((tmp_path / "usage.jsonl").read_text().splitlines()) == 4 + len(fix)

    second = await graph.ainvoke({"question": "And what about PETG?"}, config, context=ctx)
    assert isinstance(second["answer"], str)
    state = await graph.aget_state(config)
    assert "hot car" in state.values["conversation"]
