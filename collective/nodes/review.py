"""review: the optional peer-review round; each specialist ranks the others, anonymised."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from langgraph.runtime import Runtime
from pydantic import ValidationError

from collective import agents
from collective.budget.assembly import labelled_section, text_section
from collective.errors import BackendError, BudgetError
from collective.graph.context import CouncilContext
from collective.graph.state import Proposal, ReviewTask
from collective.kb.citations import neutralise
from collective.models.refs import resolve_backend
from collective.nodes.model_call import NodeProgress, call_model
from collective.prompts import council
from collective.prompts import review as prompt

__all__ = ["aggregate_rankings", "review"]

REVIEW_OUTPUT_CAP = 256
"""A ranking is a short JSON object."""


async def review(task: ReviewTask, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """Rank the other members' proposals; a reviewer that fails is recorded, never fatal."""
    ctx = runtime.context
    member = task["member"]
    node = agents.reviewer(member)
    others = [p for p in task["proposals"] if p["member"] != member]
    shown = dict(zip(prompt.labels(len(others)), others, strict=True))
    backend = resolve_backend(ctx.member_backend(task["index"]))
    progress = NodeProgress(node, backend.model)
    ranking: dict[str, Any] = {"reviewer": member, "order": [], "reason": "", "error": None}
    update: dict[str, Any] = {}
    try:
        call = await call_model(
            ctx,
            node=node,
            backend=backend,
            contents=[
                text_section("system", prompt.SYSTEM.format(k=ctx.k)),
                text_section("conversation_summary", task["conversation"], keep="end"),
                council.task_section(
                    prompt.task_text(task["question"], member),
                    alike=[prompt.task_text(task["question"], m) for m in agents.members(ctx.k)],
                ),
                labelled_section(
                    "proposals", [(label, neutralise(p["text"])) for label, p in shown.items()]
                ),
            ],
            compose=prompt.compose,
            question=task["question"],
            json_schema=prompt.ranking_schema(list(shown)),
            output_cap=REVIEW_OUTPUT_CAP,
        )
        update["budgets"] = [call.report_dict]
        parsed = prompt.PeerRanking.model_validate_json(call.result.text)
        order = list(dict.fromkeys(label for label in parsed.ranking if label in shown))
        if set(order) != set(shown):
            raise ValueError(f"ranked {order} but was shown {list(shown)}")
        ranking.update(order=[shown[label]["member"] for label in order], reason=parsed.reason)
    except (BackendError, BudgetError, ValidationError, ValueError) as error:
        ranking["error"] = f"{type(error).__name__}: {error}".splitlines()[0]
    timings = progress.done(status="failed" if ranking["error"] else "done")
    return {**update, "rankings": [ranking], "timings": timings}


def aggregate_rankings(
    rankings: list[dict[str, Any]], proposals: list[Proposal]
) -> list[dict[str, Any]]:
    """Mean rank per proposal over the reviewers that ranked it (1 = best), best first."""
    ranks: dict[str, list[int]] = defaultdict(list)
    for ranking in rankings:
        for position, member in enumerate(ranking["order"], 1):
            ranks[member].append(position)
    rows = [
        {"member": p["member"], "mean_rank": sum(r) / len(r), "votes": len(r)}
        for p in proposals
        if (r := ranks.get(p["member"]))
    ]
    return sorted(rows, key=lambda row: (row["mean_rank"], row["member"]))
