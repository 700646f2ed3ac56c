"""The one interface every model backend implements.

A backend is a thin translation layer between collective's `ChatMessage` lists and one kind of
server. It reports the context window it really has, provides the best `TokenCounter` it can,
and translates every transport failure into `collective.errors` types at this edge.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collective.budget.counting import ChatMessage, TokenCounter

__all__ = ["Backend", "ChatResult", "Health", "ToolCall", "Usage"]


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


@dataclass(frozen=True)
class Health:
    """Whether a backend can serve requests now."""

    ok: bool
    detail: str


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

    output_cap: int | None = None
    """The largest answer worth asking this model for (a small model's limit); None: no cap."""

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
        n = await asyncio.to_thread((await self.token_counter()).count_messages, messages)
        return n + (await self.count_tools(tools) if tools else 0)

    async def count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        """Tokens the tool schemas add beside the messages (default: their JSON, counted).

        A backend that renders tools through its template overrides this.
        """
        counter = await self.token_counter()
        return await asyncio.to_thread(counter.count, json.dumps(list(tools)))

    @abstractmethod
    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float = 0.2,
        stop: Sequence[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> ChatResult:
        """Complete a chat.

        `tool_choice` (`auto`, `required`, `none`) is honoured where the server has it
        (llama-server); other backends leave the choice to the model.

        Raises:
            ContextOverflow: The prompt does not fit (with the server's numbers).
            BackendUnavailable: The server is down, loading or refused the connection.
            BackendTimeout: No answer in time.
            InvalidResponse: An answer collective cannot interpret.
        """

    @abstractmethod
    async def health(self) -> Health:
        """Whether the backend can serve requests now (never raises)."""

    async def aclose(self) -> None:
        """Release connections and models."""
