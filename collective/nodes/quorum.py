"""quorum: the join after the specialists; checks the quorum and opens the review round."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Send

from collective import agents
from collective.errors import QuorumError
from collective.graph.context import CouncilContext
from collective.graph.state import CouncilState, Proposal, answered, review_task
from collective.nodes.early_stop import close_race

__all__ = ["check_quorum", "quorum", "route_review"]


def check_quorum(proposals: list[Proposal], ctx: CouncilContext) -> list[Proposal]:
    """The proposals that answered; below quorum, a clear error that keeps what arrived."""
    arrived = answered(proposals)
    if len(arrived) < ctx.quorum_needed:
        failures = "; ".join(f"{p['member']}: {p['error']}" for p in proposals if p["error"])
        # No failure at all: fewer members ran than k says (e.g. a run started with another k).
        why = failures or f"no specialist failed: {len(proposals)} of {ctx.k} ran"
        raise QuorumError(
            f"only {len(arrived)} of {ctx.k} specialists answered, below the quorum of "
            f"{ctx.quorum_needed} ({why}); check the failing backends or lower the quorum",
            proposals=[dict(p) for p in proposals],
        )
    return arrived


async def quorum(state: CouncilState, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """Stop the run with `QuorumError` when too few specialists answered.

    A run whose early stop cancelled members (`collective.nodes.early_stop`) had enough
    answers: the judge rules on those that arrived, and a note says why the others did not.
    """
    race = close_race(state.get("race"))
    if race is not None and race.reason is not None:
        stopped = [p["member"] for p in state.get("proposals", []) if p.get("stopped")]
        note = f"early stop: {race.reason}; stopped {', '.join(stopped) or 'no member'}"
        return {"notes": [*state.get("notes", []), note]}
    check_quorum(state.get("proposals", []), runtime.context)
    return {}


def route_review(state: CouncilState, runtime: Runtime[CouncilContext]) -> list[Send] | str:
    """With `review` on and two or more answers, every member that answered ranks the others."""
    members = answered(state.get("proposals", []))
    if not runtime.context.review or len(members) < 2:
        return agents.JUDGE
    return [Send(agents.REVIEW, review_task(state, p["member"], members)) for p in members]
