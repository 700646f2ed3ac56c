"""The council graph, and a node that mounts it in a parent graph with its own state.

retrieve -> plan -> specialist x K (Send) -> quorum -> [review x K (Send)] -> judge -> remember

With adaptive answering on (`CouncilContext.confident_at`), the judge's own answer (`draft`)
comes first, alone: where its model was sure of it, the judge rules on it with no member asked
(no further model call); else the K members answer after it, and the run goes on as above.
With early stop (`agree_early`) the members race the judge's own answer instead, and those still
writing are cancelled once enough answers agree or the own answer is confident
(`collective.nodes.early_stop`).

`build_answer_graph` compiles the same nodes without planner and memory for the answer modes
(`collective.modes`): retrieve -> N specialists [-> quorum -> [review] -> judge].

Every node sees a `CouncilContext`: the run's own, the defaults when the run has none, or one
built from a JSON object; any other context (a parent graph's) is refused with a `ConfigError`
that says to mount the council with `council_node`, which runs it under its own context.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from collective import agents
from collective.errors import ConfigError
from collective.graph.context import CouncilContext, council_context
from collective.graph.state import (
    CouncilInput,
    CouncilOutput,
    CouncilState,
    ReviewTask,
    SpecialistTask,
    specialist_task,
)
from collective.models.confidence import is_confident
from collective.nodes.early_stop import new_race, raced_draft
from collective.nodes.judge import judge
from collective.nodes.plan import plan
from collective.nodes.quorum import quorum, route_review
from collective.nodes.remember import remember
from collective.nodes.retrieve import retrieve
from collective.nodes.retry import TRANSIENT_RETRY
from collective.nodes.review import review
from collective.nodes.specialist import specialist

__all__ = [
    "build_answer_graph",
    "build_graph",
    "council_node",
    "member_sends",
    "route_after_draft",
    "route_specialists",
]

DEFAULT_USER = "default"
"""The user id of runs that name none (memory is still kept per thread)."""


def _run_user(ctx: CouncilContext, runtime: Runtime[Any]) -> str:
    """`ctx.user_id`, else the config's `configurable.user_id`, else the server's user."""
    if ctx.user_id:
        return ctx.user_id
    from langgraph.config import get_config

    try:
        user = get_config().get("configurable", {}).get("user_id")
    except RuntimeError:  # not inside a runnable context
        user = None
    if not user and runtime.server_info is not None and runtime.server_info.user is not None:
        user = getattr(runtime.server_info.user, "identity", None)
    return str(user) if user else DEFAULT_USER


def _council_runtime(runtime: Runtime[Any], memory: bool = False) -> Runtime[CouncilContext]:
    """The runtime with its context as a `CouncilContext`; for a `memory` node, its user set.

    Only the nodes that open the memory tiers (retrieve, remember) need the run's user: the
    others are spared a copy of the context.
    """
    ctx = council_context(runtime.context)
    if memory and (user := _run_user(ctx, runtime)) != ctx.user_id:
        ctx = ctx.but(user_id=user)
    return runtime.override(context=ctx)


def _with_council_context(node: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a node or router so that it always gets a `CouncilContext` (see module doc)."""
    if node is retrieve:

        @functools.wraps(node)
        async def first(state: Any, runtime: Runtime[Any]) -> Any:
            if not isinstance(state, Mapping) or "question" not in state:
                raise ConfigError(
                    "the council's input needs a `question`; to run it inside a parent graph "
                    "whose state has other keys, mount it with "
                    "collective.graph.council_node(council, question=KEY)"
                )
            return await node(state, _council_runtime(runtime, memory=True))

        return first
    if inspect.iscoroutinefunction(node):
        memory = node is remember

        @functools.wraps(node)
        async def run(state: Any, runtime: Runtime[Any]) -> Any:
            return await node(state, _council_runtime(runtime, memory))

        return run

    # A router runs on the event loop as a coroutine: a plain function would cost a thread hop.
    @functools.wraps(node)
    async def route(state: Any, runtime: Runtime[Any]) -> Any:
        return node(state, _council_runtime(runtime))

    return route


def route_specialists(state: CouncilState, runtime: Runtime[CouncilContext]) -> list[Send]:
    """Fan out to K specialists and the judge's own answer (`draft`), which needs none of theirs.

    Each specialist gets the chunks, the plan and the conversation; the draft the whole state.
    With adaptive answering (`confident_at`) the draft goes alone: `route_after_draft` decides.
    """
    ctx = runtime.context
    if ctx.agree_early is not None:  # they race: each member a call of its own, cancellable
        raced: CouncilState = {**state, "race": new_race(ctx.agree_early)}
        return [*member_sends(raced, ctx, ctx.k), Send(agents.DRAFT, raced)]
    if ctx.confident_at is not None:
        return [Send(agents.DRAFT, state)]
    return [*member_sends(state, ctx, ctx.k), Send(agents.DRAFT, state)]


def route_after_draft(state: CouncilState, runtime: Runtime[CouncilContext]) -> Any:
    """After the judge's own answer: the quorum (members ran beside it), or adaptively.

    With `confident_at`: a draft its model was sure of goes straight to the judge, which rules
    on it alone; an unsure one (or none: the draft failed) sends the K members now.
    """
    ctx = runtime.context
    if ctx.confident_at is None or ctx.agree_early is not None:  # the members ran beside it
        return agents.QUORUM
    if is_confident((state.get("own") or {}).get("confidence"), ctx.confident_at):
        return agents.JUDGE
    return member_sends(state, ctx, ctx.k)


def member_sends(state: CouncilState, ctx: CouncilContext, members: int) -> list[Send]:
    """A `Send` per member, or one per run of members that sample one prompt alike.

    Members sample alike without a plan (it names each member's angle) where
    `CouncilContext.samples_alike` says so: one request answers those, unless they race (early
    stop cancels members one by one).
    """
    sends: list[Send] = []
    first = 0
    alike = not state.get("plan") and not state.get("race")
    while first < members:
        n = 1
        while alike and first + n < members and ctx.samples_alike(first, first + n):
            n += 1
        sends.append(Send(agents.SPECIALIST, specialist_task(state, first, samples=n)))
        first += n
    return sends


def build_graph(checkpointer: Any = None, store: Any = None, *, name: str = "collective") -> Any:
    """Compile the council graph.

    Args:
        checkpointer: Any LangGraph checkpointer (a run that dies in the judge resumes on the
            same thread without re-running the specialists that finished).
        store: Any LangGraph store; the L2 long-term memory tier lives there.
        name: The compiled graph's name.

    Returns:
        The compiled graph; run it with `context=CouncilContext(...)` (none: the defaults).
    """
    builder = _builder()
    wrap = _with_council_context
    for node in agents.NODES:
        _add(builder, node)
    builder.add_edge(START, agents.RETRIEVE)
    builder.add_edge(agents.RETRIEVE, agents.PLAN)
    builder.add_conditional_edges(
        agents.PLAN, wrap(route_specialists), [agents.SPECIALIST, agents.DRAFT]
    )
    builder.add_conditional_edges(
        agents.DRAFT,
        wrap(route_after_draft),
        [agents.QUORUM, agents.JUDGE, agents.SPECIALIST],
    )
    _verdict_edges(builder, then=agents.REMEMBER)
    builder.add_edge(agents.REMEMBER, END)
    return builder.compile(checkpointer=checkpointer, store=store, name=name)


def build_answer_graph(
    members: int,
    *,
    judge: bool,
    name: str = "collective-answer",
    retrieved: bool = False,
    quorum: bool = True,
) -> Any:
    """Compile the council's nodes without planner and memory, for `collective.modes`.

    retrieve -> `members` specialists (Send), then with `judge` the council's quorum,
    [review] and judge; without, the run ends with the proposals.

    Args:
        members: How many specialists answer (members may exceed the context's `k`: each sees
            the prompt of a council of `k`). 0: none, the graph ends after retrieval (or with
            `retrieved` and `judge`, the judge rules on the `proposals` given).
        judge: Whether the judge rules on the proposals.
        name: The compiled graph's name.
        retrieved: The input already holds retrieval's output (`chunks`, `retrieval`,
            `conversation`): the graph starts after it, so that answer modes share one
            retrieval (`collective.modes.run_arms`). The input and output are the whole state.
        quorum: With no `members` and `judge`: whether the judge rules on the proposals given
            (through the quorum and review), or alone: its own answer (`single`).
    """

    def route(state: CouncilState, runtime: Runtime[CouncilContext]) -> list[Send]:
        return member_sends(state, runtime.context, members)

    builder = _builder(whole=retrieved or not members)
    stages = (agents.SPECIALIST,) if members else ()
    if not retrieved:
        stages = (agents.RETRIEVE, *stages)
    ruling = (agents.QUORUM, agents.REVIEW, agents.JUDGE) if members or quorum else (agents.JUDGE,)
    for node in (*stages, *(ruling if judge else ())):
        _add(builder, node)
    first = agents.RETRIEVE if not retrieved else START
    if members:
        builder.add_conditional_edges(first, _with_council_context(route), [agents.SPECIALIST])
    if not retrieved:
        builder.add_edge(START, agents.RETRIEVE)
    last = agents.SPECIALIST if members else first
    if judge:
        if members:
            _verdict_edges(builder, then=END)
        elif quorum:
            builder.add_edge(START, agents.QUORUM)
            _verdict_edges(builder, then=END, after=None)
        else:
            builder.add_edge(START, agents.JUDGE)
            builder.add_edge(agents.JUDGE, END)
    elif last != START:
        builder.add_edge(last, END)
    return builder.compile(name=name)


def _builder(whole: bool = False) -> StateGraph[Any, Any, Any, Any]:
    """A graph builder with the council's state, input, output and context schemas.

    `whole`: the input and output are the whole state (a graph that continues another's run).
    """
    return StateGraph(
        CouncilState,
        context_schema=CouncilContext,
        input_schema=CouncilState if whole else CouncilInput,
        output_schema=CouncilState if whole else CouncilOutput,
    )


_NODES: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    agents.RETRIEVE: (retrieve, {}),
    agents.PLAN: (plan, {"retry_policy": TRANSIENT_RETRY}),
    # (a Send payload, not the state)
    agents.SPECIALIST: (
        specialist,
        {"input_schema": SpecialistTask, "retry_policy": TRANSIENT_RETRY},
    ),
    agents.DRAFT: (raced_draft, {}),
    agents.QUORUM: (quorum, {}),
    agents.REVIEW: (review, {"input_schema": ReviewTask, "retry_policy": TRANSIENT_RETRY}),
    agents.JUDGE: (judge, {"retry_policy": TRANSIENT_RETRY}),
    agents.REMEMBER: (remember, {}),
}
"""Every node of the council with its options: one table for every graph built here."""


def _add(builder: StateGraph[Any, Any, Any, Any], node: str) -> None:
    function, options = _NODES[node]
    builder.add_node(node, _with_council_context(function), **options)


def _verdict_edges(
    builder: StateGraph[Any, Any, Any, Any], then: str, after: str | None = agents.SPECIALIST
) -> None:
    """`after` -> quorum -> [review] -> judge -> `then` (None: quorum's entry is set already)."""
    if after is not None:
        builder.add_edge(after, agents.QUORUM)
    builder.add_conditional_edges(
        agents.QUORUM, _with_council_context(route_review), [agents.REVIEW, agents.JUDGE]
    )
    builder.add_edge(agents.REVIEW, agents.JUDGE)
    builder.add_edge(agents.JUDGE, then)


def council_node(
    council: Any = None,
    *,
    context: CouncilContext | Mapping[str, Any] | None = None,
    question: str | Callable[[Any], str] = "question",
    outputs: Mapping[str, str] | None = None,
) -> Callable[[Any], Awaitable[dict[str, Any]]]:
    """A node for a parent graph with its own state and context that runs the council.

    The node reads the question from the parent's state, runs the council under its own
    `context` (the parent's context is never passed on) and writes the council's output keys
    into the parent's keys. Run inside a parent that has a checkpointer, a council compiled
    with `build_graph(checkpointer=True)` keeps its conversation memory per parent thread.

    Args:
        council: A compiled council (`build_graph(...)`); None compiles the default.
        context: The council's settings (None: the defaults).
        question: The parent state key holding the question, or a function of the state.
        outputs: Parent key -> council output key (`answer`, `citations`, `proposals`, ...);
            default `{"answer": "answer", "citations": "citations"}`.

    Returns:
        An async node function `(state) -> dict` for `StateGraph.add_node`.
    """
    graph = council if council is not None else build_graph()
    ctx = council_context(context)
    mapping = dict(outputs or {"answer": "answer", "citations": "citations"})

    async def run_council(state: Any) -> dict[str, Any]:
        text = question(state) if callable(question) else state.get(question)
        if not isinstance(text, str):
            raise ConfigError(
                f"council_node: the parent state has no question under {question!r}; pass "
                "question=KEY (or a function of the state)"
            )
        out = await graph.ainvoke({"question": text}, context=ctx)
        return {key: out.get(name) for key, name in mapping.items()}

    return run_council


graph = build_graph()
"""The compiled default (no checkpointer): `collective.graph.graph`, and what `langgraph.json`
serves (LangGraph's server reads it from this module's namespace)."""
