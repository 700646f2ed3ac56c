"""A scripted backend: for faults that cannot be caused for real, and fixed-latency benchmarks.

Everything that can run on the real model does (tests/integration); this backend exists to
make a judge die once, a specialist time out, or every call take exactly 200 ms. Beside it, a
KB store of a list and an embedder of another model than the built-in one.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from collective.budget.counting import ChatMessage, TokenCounter, tiktoken_counter
from collective.kb.store import Chunk
from collective.models.base import Backend, ChatResult, Health, ToolCall, Usage
from collective.models.confidence import token_confidence

Reply = str | Callable[[Sequence[ChatMessage]], "str | list[ToolCall]"]


class ScriptedBackend(Backend):
    """Answers with a fixed or computed reply after a fixed latency; can fail on schedule.

    Args:
        model: The model name it reports.
        reply: The answer, or a function of the messages.
        latency_s: Seconds each call takes.
        n_ctx: The context window it reports.
        failures: Exceptions raised by the first calls, in order (None = answer normally).
        logprobs: The log-probability of every token of each answer (its `confidence`); None:
            the backend reports none, as Ollama's.
    """

    def __init__(
        self,
        model: str = "scripted",
        reply: Reply = "ok",
        *,
        latency_s: float = 0.0,
        n_ctx: int = 32_768,
        failures: Sequence[BaseException | None] = (),
        counter: TokenCounter | None = None,
        supports_tools: bool = False,
        logprobs: float | None = None,
    ) -> None:
        self.logprobs = logprobs
        self.supports_tools = supports_tools
        self.spec = f"scripted:{model}"
        self.model = model
        self.reply = reply
        self.latency_s = latency_s
        self.n_ctx = n_ctx
        self.failures = list(failures)
        self.calls: list[list[ChatMessage]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        """The most calls this backend had open at once (concurrency, without a clock)."""
        self.kwargs: list[dict[str, Any]] = []
        self._counter = counter or tiktoken_counter("cl100k_base")

    async def context_window(self) -> int:
        return self.n_ctx

    async def token_counter(self) -> TokenCounter:
        return self._counter

    async def chat(
        self,
        messages,
        *,
        max_tokens,
        temperature=0.2,
        stop=None,
        json_schema=None,
        tools=None,
        tool_choice=None,
        seed=None,
        n=1,
    ) -> ChatResult:
        self.calls.append(list(messages))
        self.kwargs.append(
            {
                "max_tokens": max_tokens,
                "temperature": temperature,
                "json_schema": json_schema,
                "tools": tools,
                "tool_choice": tool_choice,
                "seed": seed,
            }
        )
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
        finally:
            self.in_flight -= 1
        if self.failures:
            failure = self.failures.pop(0)
            if failure is not None:
                raise failure
        reply = self.reply(messages) if callable(self.reply) else self.reply
        calls = reply if isinstance(reply, list) else []
        text = "" if calls else str(reply)
        usage = Usage(self._counter.count_messages(messages), self._counter.count(text))
        confidence = None
        if self.logprobs is not None and usage.completion_tokens:
            confidence = token_confidence([self.logprobs] * usage.completion_tokens)
        return ChatResult(
            text=text,
            usage=usage,
            model=self.model,
            tool_calls=calls,
            confidence=confidence,
            confidence_note=None if confidence else "scripted: no log-probabilities",
        )

    async def health(self) -> Health:
        return Health(True, "scripted")


class ListStore:
    """A tiny in-memory knowledge store: `search` returns the first `k` chunks given."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = {c.id: c for c in chunks}

    def search(self, query: str, k: int) -> list[Chunk]:
        return list(self.chunks.values())[:k]

    def get(self, chunk_id: str) -> Chunk | None:
        return self.chunks.get(chunk_id)


class HashingEmbedder:
    """Another embedding model: hashed bag of words (16 dimensions), as a KB may carry."""

    name = "hashing-16"
    dim = 16

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, hashlib.sha256(word.encode()).digest()[0] % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
