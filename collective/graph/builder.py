"""The council graph.

retrieve -> plan -> specialist x K (Send) -> quorum -> [review x K (Send)] -> judge -> remember
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from collective import agents
from collective.graph.context import CouncilContext
from collective.graph.state import (
    CouncilInput,
    CouncilOutput,
    CouncilState,
    ReviewTask,
    SpecialistTask,
)
from collective.nodes.judge import judge
from collective.nodes.plan import plan
from collective.nodes.quorum import quorum, route_review
from collective.nodes.remember import remember
from collective.nodes.retrieve import retrieve
from collective.nodes.retry import TRANSIENT_RETRY
from collective.nodes.review import review
from collective.nodes.specialist import specialist

__all__ = ["build_graph", "route_specialists"]


def route_specialists(state: CouncilState, runtime: Runtime[CouncilContext]) -> list[Send]:
    """Fan out to K specialists, each with the chunks, the plan and the conversation."""
    ctx = runtime.context
    return [
        Send(
            "specialist",
            SpecialistTask(
                member=agents.member(i),
                index=i,
                question=state["question"],
                plan=state.get("plan", ""),
                conversation=state.get("conversation", ""),
                chunks=state.get("chunks", []),
                retrieval_profile=state.get("retrieval", {}).get("applied", "balanced"),
            ),
        )
        for i in range(ctx.k)
    ]


def build_graph(checkpointer: Any = None, store: Any = None, *, name: str = "collective") -> Any:
    """Compile the council graph.

    Args:
        checkpointer: Any LangGraph checkpointer (a run that dies in the judge resumes on the
            same thread without re-running the specialists that finished).
        store: Any LangGraph store; the L2 long-term memory tier lives there.
        name: The compiled graph's name.

    Returns:
        The compiled graph; run it with `context=CouncilContext(...)`.
    """
    builder = StateGraph(
        CouncilState,
        context_schema=CouncilContext,
        input_schema=CouncilInput,
        output_schema=CouncilOutput,
    )
    builder.add_node("retrieve", retrieve)
    builder.add_node("plan", plan, retry_policy=TRANSIENT_RETRY)
    builder.add_node(  # type: ignore[call-overload]  # (a Send payload, not the state)
        "specialist", specialist, input_schema=SpecialistTask, retry_policy=TRANSIENT_RETRY
    )
    builder.add_node("quorum", quorum)
    builder.add_node(  # type: ignore[call-overload]
        "review", review, input_schema=ReviewTask, retry_policy=TRANSIENT_RETRY
    )
    builder.add_node("judge", judge, retry_policy=TRANSIENT_RETRY)
    builder.add_node("remember", remember)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "plan")
    builder.add_conditional_edges("plan", route_specialists, ["specialist"])
    builder.add_edge("specialist", "quorum")
    builder.add_conditional_edges("quorum", route_review, ["review", "judge"])
    builder.add_edge("review", "judge")
    builder.add_edge("judge", "remember")
    builder.add_edge("remember", END)
    return builder.compile(checkpointer=checkpointer, store=store, name=name)
