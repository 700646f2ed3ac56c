"""Models that help the council's machinery: the deep profile's query rewriter and the memory
summarizer, both configured by backend."""

from collective.graph import CouncilContext, build_graph
from tests.fakes import ScriptedBackend


def context(**kw):
    return CouncilContext(
        k=1,
        planner=ScriptedBackend("planner", "plan"),
        specialists=[ScriptedBackend("spec", "ASA")],
        judge=kw.pop("judge", ScriptedBackend("judge", "ASA")),
        **kw,
    )


async def test_deep_retrieval_uses_the_configured_rewriter(tmp_path):
    rewriter = ScriptedBackend("rewriter", "dashboard temperature\n- ASA heat resistance")
    out = await build_graph().ainvoke(
        {"question": "What survives a hot car?"},
        context=context(rewriter=rewriter, retrieval="deep", kb=str(tmp_path / "kb.sqlite")),
    )
    assert len(rewriter.calls) == 1
    assert "What survives a hot car?" in rewriter.calls[0][-1]["content"]
    assert {"dashboard temperature", "ASA heat resistance"} <= set(out["retrieval"]["rewrites"])


async def test_memory_compression_uses_the_configured_summarizer(tmp_path):
    summarizer = ScriptedBackend("summarizer", "A short model-written summary.")
    # past 80% of L0 in one turn; each clause its own (a verdict says nothing twice), after a
    # supported answer in one sentence: the verdict's direct answer is its first sentence or two
    cases = (a + b + c for a in "abcdefghij" for b in "abcdefghij" for c in "abcdefghij")
    clauses = "; ".join(f"the resin keeps its shape in case {w}" for w in cases)
    long_verdict = f"Use ASA [KB#mem_asa]. The reason: {clauses}."
    out = await build_graph().ainvoke(
        {"question": "What survives a hot car?"},
        context=context(
            summarizer=summarizer,
            judge=ScriptedBackend("judge", long_verdict),
            kb=str(tmp_path / "kb.sqlite"),
        ),
    )
    assert out["answer"]
    assert summarizer.calls, "L0 compression should have asked the summarizer model"
