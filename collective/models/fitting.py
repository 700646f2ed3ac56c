"""Fit a prompt to the context a backend really has, and refit once if the server disagrees.

Plans are computed from `Backend.context_window()`, but a server can change under us (restarted
with other slots) or count a little differently from the plan. `chat_fitted` builds the prompt
for the reported window, sends it, and on `ContextOverflow` rebuilds it for the window the
server itself reported (or, when the window was right but the count was off, for the window less
the overshoot) and retries exactly once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from collective.budget.counting import ChatMessage
from collective.errors import ContextOverflow
from collective.models.base import Backend, ChatResult

__all__ = ["FittedChat", "chat_fitted"]

log = logging.getLogger(__name__)

BuildMessages = Callable[[int], Sequence[ChatMessage]]
"""Assembles the prompt for a context of `n_ctx` tokens; it must leave room for the output
(`max_tokens`) itself. Called in a worker thread, so it may count synchronously."""


@dataclass(frozen=True)
class FittedChat:
    """A chat answered by `chat_fitted`, with the fit it was answered under."""

    result: ChatResult
    messages: list[ChatMessage]
    """The messages that were finally sent."""
    n_ctx: int
    """The context the final prompt was built for."""
    refitted: bool
    """True when the first attempt overflowed and the prompt was rebuilt."""
    overflow: ContextOverflow | None = None
    """The overflow that caused the refit, if any."""


async def chat_fitted(
    backend: Backend,
    build_messages: BuildMessages,
    *,
    max_tokens: int,
    n_ctx: int | None = None,
    **chat_kwargs: Any,
) -> FittedChat:
    """Build a prompt for the backend's context, send it, and refit once on overflow.

    Args:
        backend: Where to send the chat.
        build_messages: `n_ctx -> messages`; see `BuildMessages`.
        max_tokens: Output tokens to reserve and request.
        n_ctx: The context to plan for; default `await backend.context_window()`.
        **chat_kwargs: Passed to `backend.chat` (temperature, stop, json_schema, tools).

    Raises:
        ContextOverflow: The refitted prompt overflowed too (the builder cannot fit it).
        BackendError: Any other backend failure, unchanged.
    """
    target = n_ctx if n_ctx is not None else await backend.context_window()
    messages = list(await asyncio.to_thread(build_messages, target))
    try:
        result = await backend.chat(messages, max_tokens=max_tokens, **chat_kwargs)
        return FittedChat(result, messages, target, refitted=False)
    except ContextOverflow as overflow:
        if overflow.n_ctx < target:
            refit = overflow.n_ctx  # the server's slots are smaller than planned
        else:
            # The window was right, the prompt counted more than planned: shrink by the excess.
            excess = overflow.n_prompt_tokens + max_tokens - overflow.n_ctx
            refit = target - max(excess, 1)
        log.warning(
            "%s: prompt of %d tokens overflowed n_ctx=%d (planned for %d); refitting to %d",
            backend.spec,
            overflow.n_prompt_tokens,
            overflow.n_ctx,
            target,
            refit,
        )
        if refit <= max_tokens:
            raise
        messages = list(await asyncio.to_thread(build_messages, refit))
        result = await backend.chat(messages, max_tokens=max_tokens, **chat_kwargs)
        return FittedChat(result, messages, refit, refitted=True, overflow=overflow)
