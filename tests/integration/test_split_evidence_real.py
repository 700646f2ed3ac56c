"""Split evidence on the real embedded model (llama.cpp in process, gemma 270M), demo KB.

Each member's KB section is tight (about 5 chunks), retrieval hands over more: `auto` splits,
every member's real prompt fits its context, and the members' own slices do not overlap.
"""

import pytest

from collective.graph import CouncilContext, build_graph
from collective.models.registry import close_all

pytestmark = pytest.mark.integration

TIGHT = {"n_ctx": 2048, "output": 64, "sections": {"system": 200, "kb_chunks": 240, "task": 160}}


async def test_a_real_council_splits_evidence_its_members_cannot_each_hold(tmp_path, gguf_path):
    ctx = CouncilContext(
        k=2,
        kb=str(tmp_path / "kb.sqlite"),
        retrieval="deep",
        max_inject=16,
        budgets={"specialist": TIGHT},
        output_caps={"planner": 8, "specialist": 16, "judge": 32},
        usage_log=None,
        temperature=0.0,
    )
    try:
        out = await build_graph().ainvoke(
            {"question": "Which filament for a part in a hot car: PLA, PETG, ABS, ASA or PC?"},
            context=ctx,
        )
    finally:
        await close_all()
    assert out["evidence"]["applied"] == "split", out["evidence"]
    assert "exceed one member's KB section" in out["evidence"]["reason"]
    parts = [p["evidence"] for p in out["proposals"]]
    head = set(parts[0]["head"])
    assert head and all(set(p["head"]) == head for p in parts)
    own = [set(p["seen"]) - head for p in parts]
    assert own[0] and own[1] and not own[0] & own[1]
    for budget in out["budgets"]:
        assert budget["token_counter"] == "exact:llama.cpp"
        assert budget["prompt_tokens"] + budget["max_output_tokens"] <= budget["n_ctx"]
    notes = [
        s["note"]
        for b in out["budgets"]
        if b["node"].startswith("specialist")
        for s in b["sections"]
        if s["name"] == "kb_chunks"
    ]
    assert len(notes) == 2 and all(n.startswith("split evidence, member") for n in notes)
