"""A LangChain chat model (`BaseChatModel`) as a council member, for apps that embed the graph.

An app that already has a LangChain chat model passes it where a backend is expected in the
`CouncilContext` (`judge=LangChainBackend(model, n_ctx=128_000)`, or the bare model with its
window in its metadata: `ChatOpenAI(..., metadata={"n_ctx": 128_000})`). It is held to the same
plan as the other backends, with what LangChain can say:

* the window is the one declared (LangChain models report none);
* prompts are counted with the model's own `get_num_tokens_from_messages` (and texts with
  `get_num_tokens`) plus a safety margin, labelled `estimated:langchain:<class>+10%` in every
  budget report: the provider's real template and tokenizer are not visible here;
* the answer streams through `astream`; `max_tokens` is passed where the model has that field,
  and the stream is closed once the counted answer reaches it (`finish_reason` `length`), so the
  reserved output is never exceeded by what the council uses.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from collective.budget.counting import ChatMessage, TokenCounter
from collective.errors import ConfigError, InvalidResponse
from collective.models.base import Backend, ChatDelta, ChatResult, Health, Usage
from collective.models.openai_api import MarginCounter

__all__ = ["LangChainBackend", "LangChainCounter"]


def _messages(messages: Sequence[ChatMessage]) -> list[Any]:
    from langchain_core.messages import convert_to_messages

    return convert_to_messages([{"role": m["role"], "content": m["content"]} for m in messages])


class LangChainCounter(TokenCounter):
    """Counts with a LangChain model's own `get_num_tokens` (kind `langchain:<class>`).

    Cuts are made on characters (binary search on the count): LangChain exposes token ids but
    no way back to text.
    """

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model
        self.kind = f"langchain:{type(model).__name__}"

    def _count(self, text: str) -> int:
        return int(self.model.get_num_tokens(text))

    def _longest(self, text: str, max_tokens: int, *, from_end: bool) -> str:
        lo, hi = 0, len(text)  # the longest length whose piece counts <= max_tokens
        while lo < hi:
            mid = (lo + hi + 1) // 2
            piece = text[len(text) - mid :] if from_end else text[:mid]
            if self.count(piece) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        return text[len(text) - lo :] if from_end else text[:lo]

    def head(self, text: str, max_tokens: int) -> str:
        """The longest prefix counted at most `max_tokens`."""
        return self._longest(text, max_tokens, from_end=False)

    def tail(self, text: str, max_tokens: int) -> str:
        """The longest suffix counted at most `max_tokens`."""
        return self._longest(text, max_tokens, from_end=True)

    def count_messages(
        self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None = None
    ) -> int:
        """The model's own count of the chat (`get_num_tokens_from_messages`)."""
        return int(self.model.get_num_tokens_from_messages(_messages(messages), tools=tools))


class _Estimated(MarginCounter):
    """The margin applies to whole chats too (`LangChainCounter.count_messages`)."""

    def count_messages(
        self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None = None
    ) -> int:
        return math.ceil(self.inner.count_messages(messages, tools) * (1 + self.margin))


class LangChainBackend(Backend):
    """A LangChain `BaseChatModel` with a declared window.

    Args:
        model: The chat model.
        n_ctx: Its context window (tokens), as the provider documents it.
        margin: Safety margin on its counts.
        output_cap: The largest answer worth asking it for.
    """

    def __init__(
        self, model: Any, *, n_ctx: int, margin: float = 0.1, output_cap: int | None = None
    ) -> None:
        if n_ctx <= 0:
            raise ConfigError("a LangChain member needs its window: LangChainBackend(m, n_ctx=N)")
        self.chat_model = model
        self.n_ctx = n_ctx
        name = getattr(model, "model_name", None) or getattr(model, "model", None)
        self.model = str(name or type(model).__name__)
        self.spec = f"langchain:{type(model).__name__}"
        self.output_cap = output_cap
        self._counter = _Estimated(LangChainCounter(model), margin)

    @classmethod
    def wrap(cls, model: Any) -> LangChainBackend:
        """A bare `BaseChatModel` whose `metadata` declares `n_ctx`.

        Raises:
            ConfigError: It is not a chat model, or declares no window.
        """
        from langchain_core.language_models import BaseChatModel

        if not isinstance(model, BaseChatModel):
            raise ConfigError(
                f"a {type(model).__name__} cannot sit on the council: give a backend spec, a "
                "collective Backend or a LangChain BaseChatModel"
            )
        n_ctx = (model.metadata or {}).get("n_ctx")
        if not isinstance(n_ctx, int):
            raise ConfigError(
                f"the LangChain {type(model).__name__} declares no window: give it "
                "metadata={'n_ctx': N} or wrap it as LangChainBackend(model, n_ctx=N)"
            )
        return cls(model, n_ctx=n_ctx)

    async def context_window(self) -> int:
        """The declared window."""
        return self.n_ctx

    async def token_counter(self) -> TokenCounter:
        """The model's own counts with a margin (`estimated:langchain:<class>+10%`)."""
        return self._counter

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float = 0.2,
        stop: Sequence[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        seed: int | None = None,
        n: int = 1,  # one completion a request (`most_samples`)
    ) -> AsyncIterator[ChatDelta]:
        """Stream through `astream`, closed once the answer reaches `max_tokens`.

        A chat model samples with its own seed: `seed` is not passed on.
        """
        model = self.chat_model
        if "max_tokens" in type(model).model_fields:
            model = model.bind(max_tokens=max_tokens)
        counted = self._counter.count_messages(messages)
        started = time.perf_counter()
        text: list[str] = []
        usage: dict[str, Any] = {}
        finish = "stop"
        pieces = model.astream(_messages(messages), stop=list(stop) if stop else None)
        try:
            async for chunk in pieces:
                usage = getattr(chunk, "usage_metadata", None) or usage
                piece = chunk.content if isinstance(chunk.content, str) else ""
                if piece:
                    text.append(piece)
                    yield ChatDelta(piece)
                if self._counter.inner.count("".join(text)) >= max_tokens:
                    finish = "length"
                    break
        except Exception as exc:
            raise InvalidResponse(f"{self.spec} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            await pieces.aclose()
        answer = "".join(text)
        out = int(usage.get("output_tokens") or self._counter.inner.count(answer))
        prompt = int(usage.get("input_tokens") or counted)
        wall_ms = (time.perf_counter() - started) * 1000
        result = ChatResult(
            answer,
            Usage(prompt, out),
            self.model,
            finish,
            timings={"wall_ms": wall_ms},
            confidence_note="token log-probabilities are not read from a LangChain chat model",
        )
        yield ChatDelta(result=result)

    async def health(self) -> Health:
        """Always ok: there is no server of its own to ask."""
        return Health(True, f"{self.spec} (a LangChain model in this process)")
