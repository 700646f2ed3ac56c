"""The one interface every model backend implements.

A backend is a thin translation layer between collective's `ChatMessage` lists and one kind of
server. It reports the context window it really has, provides the best `TokenCounter` it can,
and translates every transport failure into `collective.errors` types at this edge.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Required, TypedDict, Unpack

from collective.budget.counting import ChatMessage, TokenCounter
from collective.errors import InvalidResponse
from collective.models.confidence import Confidence

if TYPE_CHECKING:
    from collective.models.admission import ServerPool

__all__ = [
    "Backend",
    "ChatDelta",
    "ChatOptions",
    "ChatResult",
    "Health",
    "ToolCall",
    "Usage",
    "collect",
]


@dataclass(frozen=True)
class Usage:
    """Tokens of one call as the server reported them."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ChatResult:
    """The answer of one chat completion."""

    text: str
    usage: Usage
    model: str
    finish_reason: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    """Server-side timings where reported (llama-server: prompt_n, cache_n,
    predicted_per_second, ...) plus `wall_ms` measured by collective."""
    warnings: list[str] = field(default_factory=list)
    """Problems noticed after the fact, e.g. a prompt the server truncated silently."""
    reasoning: str | None = None
    """The model's separate reasoning text where the server returns one (gpt-oss `thinking`,
    llama-server `reasoning_content`); None otherwise."""
    samples: list[ChatResult] = field(default_factory=list)
    """The other completions of a request for several (`ChatOptions.n`), each with its own text,
    usage and finish; this result is the first."""
    confidence: Confidence | None = None
    """How sure the model was of this answer's tokens (`collective.models.confidence`); None
    where the backend cannot say, with `confidence_note` saying why."""
    confidence_note: str | None = None
    """Why `confidence` is None (the backend, or the server, reports no log-probabilities)."""


@dataclass(frozen=True)
class ChatDelta:
    """A piece of an answer as the model writes it (one item of `Backend.stream`)."""

    text: str = ""
    """Answer text added by this piece."""
    reasoning: str = ""
    """Reasoning (thinking) text added by this piece."""
    result: ChatResult | None = None
    """Set on a stream's last item only, which adds no text: the whole answer with its usage
    and timings, as `Backend.chat` returns it."""


@dataclass(frozen=True)
class Health:
    """Whether a backend can serve requests now."""

    ok: bool
    detail: str


class ChatOptions(TypedDict, total=False):
    """How to complete one chat (`Backend.chat`, `Backend.stream`); only `max_tokens` is needed."""

    max_tokens: Required[int]
    temperature: float
    """Default 0.2."""
    stop: Sequence[str] | None
    json_schema: dict[str, Any] | None
    """Constrain the answer to this JSON schema."""
    tools: Sequence[dict[str, Any]] | None
    """Tool schemas (OpenAI shape) the model may call."""
    tool_choice: str | None
    """`auto`, `required`, `none`: passed to llama-server (Ollama's API has none), kept in
    process (`Backend.forces_tool_calls`); the budgeted call keeps `required` on every backend
    with structured output (`collective.models.tool_calls`)."""
    seed: int | None
    """The sampling seed; None: the backend's own (same-prompt samples are given distinct ones)."""
    n: int
    """Completions of this one prompt, read once (default 1; at most `Backend.most_samples`):
    the result is the first, `ChatResult.samples` the others."""


class Backend(ABC):
    """A chat model behind some server (or in this process)."""

    spec: str
    """The config string that names this backend, e.g. `llama-server:http://127.0.0.1:8083`."""

    model: str
    """The model name as the backend reports it."""

    supports_tools: bool = False
    """Whether `chat(tools=...)` is honoured natively."""

    supports_json_schema: bool = False
    """Whether `chat(json_schema=...)` constrains the output."""

    forces_tool_calls: bool = False
    """Whether `tool_choice="required"` always yields a call (else the budgeted call holds the
    answer to the tools' schemas by structured output)."""

    output_cap: int | None = None
    """The largest answer worth asking this model for (a small model's limit); None: no cap."""

    in_process: bool = False
    """Whether the model runs in this process (its file is checked when the backend is made, so
    a preflight has nothing to ask)."""

    context_fix: str = ""
    """What to change on the server when its window is smaller than a role's preset (smoke)."""

    @abstractmethod
    async def context_window(self) -> int:
        """The context (tokens) one request really has, as the server reports it."""

    @abstractmethod
    async def token_counter(self) -> TokenCounter:
        """The most exact counter available for this model (its `kind` says which)."""

    async def count_prompt(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> int:
        """Prompt tokens of `messages` (and `tools`) as the server will see them."""
        counter = await self.token_counter()
        return await asyncio.to_thread(counter.count_messages, messages, tools)

    async def chat(
        self, messages: Sequence[ChatMessage], **options: Unpack[ChatOptions]
    ) -> ChatResult:
        """Complete a chat: `stream`, drained (a backend overrides `stream`, or this).

        Raises:
            ContextOverflow: The prompt does not fit (with the server's numbers).
            BackendUnavailable: The server is down, loading or refused the connection.
            BackendTimeout: No answer in time.
            InvalidResponse: An answer collective cannot interpret.
        """
        return await collect(self.stream(messages, **options))

    async def stream(
        self, messages: Sequence[ChatMessage], **options: Unpack[ChatOptions]
    ) -> AsyncIterator[ChatDelta]:
        """Complete a chat, yielding the answer as it is written (arguments as `chat`).

        The last item carries the `ChatResult` (`ChatDelta.result`); the texts before it add up
        to its text. Closing the iterator, or cancelling the task that drains it, stops the
        generation within about a token (an HTTP stream is closed; the server frees its slot).
        A backend that cannot stream (this default) yields its whole answer at once.

        Raises:
            As `chat`.
        """
        result = await self.chat(messages, **options)
        if result.text or result.reasoning:
            yield ChatDelta(result.text, result.reasoning or "")
        yield ChatDelta(result=result)

    async def most_samples(self) -> int:
        """The most completions one request may ask for (`ChatOptions.n`).

        1 (this default): same-prompt samples are sent as requests of their own, at once
        (`collective.budgeted_call`).
        """
        return 1

    async def pool(self) -> ServerPool | None:
        """The server's slots and the KV pool they share, read from the server.

        Admission control reserves every call's prompt + output tokens against it (see
        `collective.models.admission`). None (this default): unknown, calls are sent at once.
        """
        return None

    @abstractmethod
    async def health(self) -> Health:
        """Whether the backend can serve requests now (never raises)."""

    def replicas(self) -> list[Backend]:
        """The equivalent servers a call may be placed on (`ReplicaSet`); this backend alone."""
        return [self]

    async def model_check(self) -> Health:
        """Whether the configured model is really served (never raises; asked after `health`)."""
        return Health(True, f"{self.model} (no model listing for this kind)")

    async def before_fan_out(self) -> None:
        """Called after the planner, before the K members are sent at once (never raises).

        A server that can make the planner's prompt, left on one slot, reusable by members on
        other slots does it here; this default does nothing.
        """

    async def aclose(self) -> None:
        """Release connections and models."""


async def collect(
    deltas: AsyncIterator[ChatDelta], on_delta: Callable[[ChatDelta], Any] | None = None
) -> ChatResult:
    """Drain a `Backend.stream`, handing each piece to `on_delta`, and return its result.

    The stream is closed on the way out, also when the caller is cancelled, which stops the
    generation. The result's `timings` gain `ttft_ms`: milliseconds from sending the request
    (the start of the backend's `wall_ms`, else the first request for a piece) to the first
    answer or reasoning text (absent when nothing was written).

    Args:
        deltas: What `Backend.stream` returned.
        on_delta: Receives every piece but the last; may be a coroutine function.

    Raises:
        InvalidResponse: The stream ended without a result.
        BackendError: What the backend raised.
    """
    started = time.perf_counter()
    first: float | None = None
    async with contextlib.aclosing(deltas) as pieces:  # type: ignore[type-var]
        async for delta in pieces:
            if delta.result is not None:
                if first is not None:
                    # On the backend's clock where it reports one: its `wall_ms` starts when the
                    # request is sent (after loading and counting), so ttft_ms <= wall_ms holds.
                    wall_ms = delta.result.timings.get("wall_ms")
                    sent = time.perf_counter() - wall_ms / 1000 if wall_ms else started
                    ttft_ms = (first - max(started, sent)) * 1000
                    delta.result.timings.setdefault("ttft_ms", max(0.0, ttft_ms))
                return delta.result
            if first is None and (delta.text or delta.reasoning):
                first = time.perf_counter()
            if on_delta is not None:
                done = on_delta(delta)
                if inspect.isawaitable(done):
                    await done
    raise InvalidResponse("a model stream ended without its final result")
