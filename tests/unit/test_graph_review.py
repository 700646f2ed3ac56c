"""The optional peer-review round: anonymised proposals, structured rankings, mean ranks."""

import json
import re

from collective.graph import CouncilContext, build_graph
from tests.fakes import ScriptedBackend
from tests.unit.test_graph_council import CHUNKS, ListStore


def member_reply(name):
    def reply(messages):
        if "Rank the other specialists" in messages[-1]["content"]:
            labels = sorted(set(re.findall(r"Response [A-Z]", messages[-1]["content"])))
            return json.dumps({"ranking": labels[::-1], "reason": "the last one cites more"})
        return f"Answer from {name} [KB#mem_asa]"

    return reply


def context(review=True, **kw):
    return CouncilContext(
        k=3,
        planner=ScriptedBackend("planner", "plan"),
        specialists=[ScriptedBackend(f"m{i}", member_reply(f"m{i}")) for i in range(3)],
        judge=kw.pop("judge", ScriptedBackend("judge", "verdict [KB#mem_asa]")),
        knowledge=ListStore(CHUNKS),
        retrieval="lean",
        review=review,
        **kw,
    )


async def test_review_round_ranks_anonymised_peers():
    judge = ScriptedBackend("judge", "verdict [KB#mem_asa]")
    ctx = context(judge=judge)
    out = await build_graph().ainvoke({"question": "Which filament?"}, context=ctx)

    rankings = {r["reviewer"]: r for r in out["rankings"]}
    assert set(rankings) == {"specialist-1", "specialist-2", "specialist-3"}
    for reviewer, ranking in rankings.items():
        assert ranking["error"] is None
        assert reviewer not in ranking["order"] and len(ranking["order"]) == 2
    # each reviewer ranked its peers in reverse label order: the later member first
    assert rankings["specialist-1"]["order"] == ["specialist-3", "specialist-2"]
    aggregate = {row["member"]: row for row in out["ranking_aggregate"]}
    assert aggregate["specialist-3"]["mean_rank"] == 1.0
    assert aggregate["specialist-1"]["mean_rank"] == 2.0
    assert out["ranking_aggregate"][0]["member"] == "specialist-3"

    review_prompts = [c for c in ctx.specialists[0].calls if "Rank the other" in c[-1]["content"]]
    (prompt,) = review_prompts
    assert "Response A" in prompt[-1]["content"] and "Response B" in prompt[-1]["content"]
    assert "Answer from m0" not in prompt[-1]["content"]  # its own proposal is excluded
    assert "specialist-2" not in prompt[-1]["content"]  # anonymised
    assert ctx.specialists[0].kwargs[-1]["json_schema"]["properties"]["ranking"]

    review_budgets = [b for b in out["budgets"] if b["node"].startswith("review-")]
    assert len(review_budgets) == 3
    assert all(b["max_output_tokens"] <= 256 for b in review_budgets)
    assert {f"review-specialist-{i}_ms" for i in (1, 2, 3)} <= set(out["timings"])


async def test_review_is_off_by_default_and_a_bad_ranking_is_recorded_not_fatal():
    out = await build_graph().ainvoke({"question": "q"}, context=context(review=False))
    assert out.get("rankings", []) == [] and out["ranking_aggregate"] == []

    ctx = context()
    ctx.specialists[1].reply = lambda m: "not json" if "Rank" in m[0]["content"] else "ok"
    out = await build_graph().ainvoke({"question": "q"}, context=ctx)
    errors = {r["reviewer"]: r["error"] for r in out["rankings"]}
    assert errors["specialist-2"].startswith("ValidationError")
    assert errors["specialist-1"] is None and out["answer"]
