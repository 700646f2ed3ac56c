"""The council on the real embedded model (llama.cpp in process, gemma 270M) over the demo KB."""

import asyncio

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from collective.graph import CouncilContext, build_graph
from tests.integration.conftest import asked_again

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
    again = asked_again(out["budgets"])
    # in the order the calls finished: the judge drafts beside the specialists
    assert sorted(b["node"] for b in out["budgets"]) == sorted(
        ["plan", "specialist-1", "specialist-2", "judge", *fix, *again]
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
    assert len((tmp_path / "usage.jsonl").read_text().splitlines()) == 4 + len(fix) + len(again)

    second = await graph.ainvoke({"question": "And what about PETG?"}, config, context=ctx)
    assert isinstance(second["answer"], str)
    state = await graph.aget_state(config)
    assert "hot car" in state.values["conversation"]


@pytest.fixture
def adaptive(tmp_path, gguf_path):
    def make(**kw):
        return CouncilContext(
            k=2,
            kb=str(tmp_path / "kb.sqlite"),
            output_caps={"specialist": 96, "judge": 96},
            usage_log=None,
            temperature=0.0,
            **kw,
        )

    return make


QUESTION = "Which filament survives a hot car, and why?"


async def test_adaptive_a_confident_first_answer_is_the_verdict_with_no_member_call(adaptive):
    # -100: any confidence the model reports is enough
    out = await build_graph().ainvoke({"question": QUESTION}, context=adaptive(confident_at=-100.0))
    assert out["proposals"] == []
    assert {b["node"] for b in out["budgets"]} == {"judge"}  # the draft (and its fix, if any)
    confidence = out["confidence"]
    assert confidence["tokens"] > 0 and confidence["lowest"] <= confidence["mean"] <= 0.0


async def test_adaptive_an_unsure_first_answer_asks_the_members(adaptive):
    # 0: no answer of real tokens is that sure (every token at probability 1)
    out = await build_graph().ainvoke({"question": QUESTION}, context=adaptive(confident_at=0.0))
    assert out["confidence"]["lowest"] < 0.0
    assert len(out["proposals"]) == 2
    nodes = [b["node"] for b in out["budgets"]]
    assert nodes.index("judge") < nodes.index("specialist-1")  # the members came after it
    for proposal in out["proposals"]:
        if proposal["error"] is None:
            assert proposal["confidence"]["lowest"] <= proposal["confidence"]["mean"] <= 0.0


async def test_early_stop_ends_the_members_calls_on_the_engine(tmp_path, gguf_path, monkeypatch):
    from collective.models.batch_engine import BatchEngine
    from collective.models.registry import backend_from_spec, close_all

    ended: list[tuple[int, str]] = []  # (max_tokens, reason) of each request the engine ended
    finish = BatchEngine._finish

    def spy(self, job, *, reason="", error=None):
        ended.append((job.request.max_tokens, reason))
        return finish(self, job, reason=reason, error=error)

    monkeypatch.setattr(BatchEngine, "_finish", spy)

    ctx = CouncilContext(
        k=2,
        kb=str(tmp_path / "kb.sqlite"),
        # the own answer is short and sure (-100), the members would write far longer
        output_caps={"specialist": 400, "judge": 8},
        usage_log=None,
        temperature=0.0,
        agree_early=3,
        confident_at=-100.0,
    )
    try:
        out = await build_graph().ainvoke({"question": QUESTION}, context=ctx)
        engine = backend_from_spec("embedded").engine  # type: ignore[attr-defined]
        # a cancelled call's sequence ends at the engine's next step: wait for it, generously
        for _ in range(600):
            if not engine._active and not engine._queue:
                break
            await asyncio.sleep(0.1)
        assert engine._active == [] and engine._queue == []  # every member's sequence ended
    finally:
        await close_all()
    stopped = [p for p in out["proposals"] if p.get("stopped")]
    assert stopped, out["proposals"]
    # the stopped members' requests (all but the judge's 8 tokens) were cancelled on the
    # engine, not finished
    assert [r for n, r in ended if n != 8] == ["cancelled"] * len(stopped), ended
    assert all("the judge's own answer was confident" in p["error"] for p in stopped)
    members = {b["node"] for b in out["budgets"]} - {"judge"}
    assert not members & {p["member"] for p in stopped}  # a stopped call reports no budget


async def test_early_stop_frees_the_members_slot_on_llama_server(tmp_path, llama_server):
    import httpx

    from collective.models.llama_server import LlamaServerBackend

    server = LlamaServerBackend(llama_server.url, load_wait=30)
    ctx = CouncilContext(
        k=1,  # the member and the judge's own answer: the server's two slots
        specialists=[server],
        judge=server,
        kb=str(tmp_path / "kb.sqlite"),
        output_caps={"specialist": 384, "judge": 8},
        usage_log=None,
        temperature=0.0,
        agree_early=2,
        confident_at=-100.0,  # any confidence the server reports is enough
    )
    try:
        out = await build_graph().ainvoke({"question": QUESTION}, context=ctx)
    finally:
        await server.aclose()
    assert out["confidence"]["tokens"] > 0  # read from the server's logprobs
    [member] = out["proposals"]
    assert member.get("stopped"), member
    async with httpx.AsyncClient(base_url=llama_server.url, timeout=30) as client:
        # the closed stream ends the slot's task at its next token (that a closed stream frees
        # the slot mid-answer is test_streaming_real's; here: the stopped member's is closed)
        for _ in range(300):
            slots = (await client.get("/slots")).json()
            if not any(s["is_processing"] for s in slots):
                break
            await asyncio.sleep(0.1)
    assert not any(s["is_processing"] for s in slots)
