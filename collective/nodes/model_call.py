"""The nodes' side of the budgeted call: backends by spec, LangGraph progress, one call.

`call_model` is `collective.budgeted_call.budgeted_call` with its progress going to LangGraph's
custom stream (`emit`); `NodeProgress` reports a node's start, end and timing once for all nodes.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Unpack

from langgraph.config import get_stream_writer

from collective import agents
from collective.budgeted_call import ModelCall, OnToken, Request, budgeted_call
from collective.errors import BackendTimeout
from collective.kb.retrieval import kb_allocation_factor
from collective.models.base import Backend
from collective.nodes.token_stream import ChatModelRun

if TYPE_CHECKING:
    from collective.graph.context import CouncilContext

__all__ = ["ModelCall", "NodeProgress", "call_model", "emit"]


def emit(event: dict[str, Any]) -> None:
    """Send a custom stream event (progress, budget reports); a no-op outside a graph run."""
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return
    writer(event)


class NodeProgress:
    """A node's progress events and timing: `running` on creation, then `done` or `failed`.

    Args:
        node: The node name in events and timings (`plan`, `specialist-2`, ...).
        model: The model the node calls, if any.
    """

    def __init__(self, node: str, model: str | None = None) -> None:
        self.node = node
        event: dict[str, Any] = {"type": "progress", "node": node, "status": "running"}
        if model is not None:
            event["model"] = model
        emit(event)
        self.started = time.perf_counter()

    def done(
        self, call: ModelCall | None = None, status: str = "done", **extra: Any
    ) -> dict[str, float]:
        """Report the end (with the call's token counts); returns the node's state `timings`.

        The timings are `<node>_ms` and, where the model reported one, `<node>_ttft_ms`.
        """
        elapsed = (time.perf_counter() - self.started) * 1000
        event: dict[str, Any] = {"type": "progress", "node": self.node, "status": status}
        event["ms"] = elapsed
        timings = {f"{self.node}_ms": elapsed}
        if call is not None:
            event["tokens_in"] = call.report.prompt_tokens
            event["server"] = call.report.server  # which replica answered
            event["tokens_out"] = call.result.usage.completion_tokens
            if (ttft := call.result.timings.get("ttft_ms")) is not None:
                event["ttft_ms"] = timings[f"{self.node}_ttft_ms"] = ttft
        emit({**event, **extra})
        return timings


async def call_model(
    ctx: CouncilContext,
    *,
    node: str,
    backend: Backend,
    on_token: OnToken | None = None,
    **request: Unpack[Request],
) -> ModelCall:
    """`budgeted_call` for a node, its progress going to the graph's custom stream.

    The call's role (budget plan, answer cap) follows from the node's name (`collective.agents`),
    its KB allocation's scale from the applied retrieval profile.
    Its answer streams as a LangChain chat-model run (`ChatModelRun`: LangGraph's `messages`
    mode and `astream_events`), and to `on_token` where given.
    """
    role = agents.role_of(node)
    request["kb_factor"] = kb_allocation_factor(request.get("retrieval_profile", "balanced"))
    # Specialists have their own limit (a failed member is not fatal); every call has one.
    limit = None if role == "specialist" else ctx.call_timeout_s
    try:
        async with asyncio.timeout(limit), ChatModelRun(node, role, backend.model) as run:

            async def token(text: str) -> None:
                await run.token(text)
                if on_token is not None and (done := on_token(text)) is not None:
                    await done

            call = await budgeted_call(
                ctx,
                role=role,
                agent=node,
                backend=backend,
                on_event=emit,
                on_token=token,
                **request,
            )
            run.result = call.result
    except TimeoutError:
        raise BackendTimeout(
            f"{node} ({backend.model} at {backend.spec}) gave no answer within {limit:g} s; "
            "raise call_timeout_s or check the server"
        ) from None
    return call
