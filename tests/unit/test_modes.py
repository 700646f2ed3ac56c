"""`collective.modes`: the council's own nodes outside the graph, built from the graph's tasks."""

from __future__ import annotations

import json

from collective.errors import InvalidResponse
from collective.graph import CouncilContext
from collective.kb.store import Chunk
from collective.modes import run_mode
from tests.fakes import ListStore, ScriptedBackend


def ranking(messages) -> str:
    labels = [line.split(" ", 1)[1].rstrip(":") for line in messages[-1]["content"].splitlines()
              if line.startswith("### Response")]  # fmt: skip
    return json.dumps({"ranking": labels, "reason": "ok"})


async def test_council_review_gives_each_reviewer_its_own_members_backend() -> None:
    """With specialist-2 failed, specialist-3 reviews on its own backend (index 2), not the 2nd."""
    members = [
        ScriptedBackend("s0", lambda m: ranking(m) if "Response" in str(m) else "ASA [KB#mem_a]"),
        ScriptedBackend("s1", "unused", failures=[InvalidResponse("garbled")]),
        ScriptedBackend("s2", lambda m: ranking(m) if "Response" in str(m) else "PETG [KB#mem_a]"),
    ]
    ctx = CouncilContext(
        k=3,
        planner=ScriptedBackend("planner", "Plan."),
        specialists=members,
        judge=ScriptedBackend("judge", "ASA [KB#mem_a]"),
        knowledge=ListStore([Chunk("mem_a", "ASA resists heat.", "a.md", score=0.9)]),
        retrieval="lean",
    )
    result = await run_mode("Which filament survives a hot car?", "council-review", ctx)
    assert [p["member"] for p in result.proposals if p["error"]] == ["specialist-2"]
    reviews = {b.model: [k for k in b.kwargs if k["json_schema"]] for b in members}
    assert (len(reviews["s0"]), len(reviews["s1"]), len(reviews["s2"])) == (1, 0, 1)
