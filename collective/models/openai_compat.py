"""The OpenAI-compatible chat API, shared by the backends that speak it.

llama-server, vLLM, SGLang, LM Studio and TGI all serve `/v1/chat/completions`:

* `chat_body`: the request body that is counted and sent (content escaped, tools).
* `parse_chat_response`, `StreamedReply`: a completion, whole or as server-sent events.
* `http_error`: the collective error for a refusal. It knows the servers' context errors:
  llama-server's HTTP 400 `exceed_context_size_error` (with `n_prompt_tokens` and `n_ctx`) and
  vLLM's HTTP 400 "This model's maximum context length is N tokens. However, you requested M
  tokens (P in the messages, O in the completion) ..." (and its newer wordings); both become
  `ContextOverflow`, which the budgeted call refits once.
* `OpenAICompatBackend`: the streaming chat with its exact precheck, health and cancel, over
  `collective.models.http` (the one place HTTP happens). A subclass supplies the window, the
  counter and the pool.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import re
import threading
import time
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from typing import Any

from collective.budget.counting import ChatMessage, TokenizerCounter
from collective.errors import (
    BackendError,
    BackendUnavailable,
    ContextOverflow,
    InvalidResponse,
    PoolExhausted,
)
from collective.models.base import Backend, ChatDelta, ChatResult, Health, ToolCall, Usage
from collective.models.confidence import token_confidence
from collective.models.http import HttpServer
from collective.models.special_tokens import escape_messages

__all__ = [
    "CHAT_PATH",
    "OpenAICompatBackend",
    "PromptMemo",
    "ServerCounter",
    "StreamedReply",
    "chat_body",
    "http_error",
    "parse_chat_response",
]

CHAT_PATH = "/v1/chat/completions"

_SERVER = "llama-server"
"""The default server name in messages (the helpers are shared; backends pass their own)."""


def chat_body(
    messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None
) -> dict[str, Any]:
    """The messages and tools of a request, as counted and as sent."""
    # Content is untrusted: escaped so the server never parses it as special tokens.
    body: dict[str, Any] = {"messages": escape_messages(messages)}
    if tools:
        body["tools"] = list(tools)
    return body


_VLLM_N_CTX = re.compile(r"maximum context length is (\d+) tokens")
_VLLM_PROMPT = re.compile(
    r"(\d+) in the messages|request has (\d+) input tokens|contains at least (\d+) input tokens"
)


def _error_fields(data: Any) -> dict[str, Any]:
    """The error object of a refusal: `{"error": {...}}`, vLLM's older flat form, or text."""
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return error
    if isinstance(error, str):
        return {"message": error}
    if isinstance(data, dict) and "message" in data:
        return data
    return {"message": str(data)}


def _overflow(error: dict[str, Any], counted: int | None, server: str, url: str) -> Any:
    """The `ContextOverflow` a context error describes, or None."""
    message = str(error.get("message", ""))
    if error.get("type") == "exceed_context_size_error":  # llama-server
        n_prompt, n_ctx = error.get("n_prompt_tokens"), error.get("n_ctx")
        if isinstance(n_prompt, int) and isinstance(n_ctx, int):
            return ContextOverflow(
                f"{server} at {url} refused a prompt of {n_prompt} tokens: its slots hold "
                f"{n_ctx} tokens ({message}). Refit the prompt to n_ctx={n_ctx}.",
                n_prompt_tokens=n_prompt,
                n_ctx=n_ctx,
            )
    window = _VLLM_N_CTX.search(message)  # vLLM (and OpenAI's own wording)
    if window is None:
        return None
    n_ctx = int(window.group(1))
    said = _VLLM_PROMPT.search(message)
    n_prompt = int(next(g for g in said.groups() if g)) if said else counted
    if n_prompt is None:
        return None
    return ContextOverflow(
        f"{server} at {url} refused a prompt of {n_prompt} tokens: its window is {n_ctx} "
        f"tokens ({message}). Refit the prompt to n_ctx={n_ctx}.",
        n_prompt_tokens=n_prompt,
        n_ctx=n_ctx,
    )


def http_error(
    status: int, data: Any, url: str, *, server: str = _SERVER, counted: int | None = None
) -> BackendError:
    """The collective error for a non-200 JSON answer from an OpenAI-compatible server.

    Args:
        status: The HTTP status.
        data: The JSON body.
        url: The server's base URL.
        server: What runs there, for messages.
        counted: Our count of the prompt, where the server's error names no prompt count.
    """
    error = _error_fields(data)
    kind, message = error.get("type", ""), str(error.get("message", ""))
    if status == 400 or kind == "exceed_context_size_error":
        overflow = _overflow(error, counted, server, url)
        if overflow is not None:
            return overflow
    if status >= 500 and "Context size has been exceeded" in message:
        # Not this request's prompt: the requests in flight together outgrew a shared KV pool,
        # and llama.cpp failed every active slot. Sending the same again fails again.
        return PoolExhausted(
            f"{server} at {url} ran out of KV pool under concurrent requests ({message}); its "
            "slots share one pool (unified KV: no -np, or --kv-unified). collective re-reads "
            "the server and waits for room; if it recurs, give the server -np K (independent "
            "slots) or a larger -c"
        )
    if status == 503:
        return BackendUnavailable(
            f"{server} at {url} is not ready ({message or 'HTTP 503'}); it is loading the model "
            "or all slots are busy. Wait and retry."
        )
    if status >= 500 and "does not match the expected" in message:
        # The model wrote something its template's tool-call format cannot parse: the server is
        # fine, the answer is not (small models do this).
        return InvalidResponse(
            f"{server} at {url} could not parse the model's answer ({message}); the model may "
            "not be able to call tools: run that role without tools"
        )
    if status >= 500:
        return BackendUnavailable(f"{server} at {url} failed with HTTP {status}: {message}")
    if status in (401, 403):
        return InvalidResponse(
            f"{server} at {url} refused the request with HTTP {status} ({message}): it wants an "
            "API key; set $OPENAI_API_KEY to the key it was started with (--api-key)"
        )
    return InvalidResponse(
        f"{server} at {url} rejected the request with HTTP {status} ({kind}): {message}"
    )


def _tool_calls(message: dict[str, Any], server: str, url: str) -> list[ToolCall]:
    calls = []
    for i, call in enumerate(message.get("tool_calls") or []):
        try:
            fn = call["function"]
            args = fn.get("arguments") or "{}"
            arguments = json.loads(args) if isinstance(args, str) else dict(args)
            calls.append(
                ToolCall(id=call.get("id") or f"call_{i}", name=fn["name"], arguments=arguments)
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidResponse(
                f"{server} at {url} sent a malformed tool call ({exc}): {call!r}"
            ) from exc
    return calls


NO_LOGPROBS = "the server returned no token log-probabilities (`logprobs`)"
WITH_TOOLS = "log-probabilities are not asked for beside tools (llama-server refuses the two)"


def _token_logprobs(choice: Any) -> list[Any]:
    """The `logprob` of each token of a choice's `logprobs.content` (OpenAI's shape)."""
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return []
    return [entry.get("logprob") for entry in content if isinstance(entry, dict)]


def parse_chat_response(
    data: Any, *, url: str, wall_ms: float, server: str = _SERVER
) -> ChatResult:
    """Turn an OpenAI-style `/v1/chat/completions` body into a `ChatResult`.

    Raises:
        InvalidResponse: The body lacks the fields every completion has.
    """
    try:
        choice = data["choices"][0]
        message = choice["message"]
        usage = data["usage"]
        prompt_tokens = int(usage["prompt_tokens"])
        completion_tokens = int(usage["completion_tokens"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise InvalidResponse(
            f"{server} at {url} sent a completion without {exc}: {str(data)[:200]!r}"
        ) from exc
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    raw_timings = data.get("timings") or {}
    timings = {
        k: float(v)
        for k, v in raw_timings.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    timings["wall_ms"] = wall_ms
    confidence = token_confidence(_token_logprobs(choice))
    return ChatResult(
        text=message.get("content") or "",
        usage=Usage(prompt_tokens, completion_tokens, cached if isinstance(cached, int) else None),
        model=str(data.get("model", "")),
        finish_reason=choice.get("finish_reason"),
        tool_calls=_tool_calls(message, server, url),
        timings=timings,
        # llama-server says `reasoning_content`; vLLM's reasoning parsers say `reasoning`.
        reasoning=message.get("reasoning_content") or message.get("reasoning") or None,
        confidence=confidence,
        confidence_note=None if confidence is not None else NO_LOGPROBS,
    )


class StreamedReply:
    """Assembles `/v1/chat/completions` server-sent events into the non-streaming body.

    A request for several completions (`n`) streams each under its choice's `index`: the
    first is this reply's, the others are kept apart (`sample_bodies`). llama-server sends a
    completion's usage in the chunk after its last one, without a choice.
    """

    def __init__(self, url: str, server: str = _SERVER) -> None:
        self.url = url
        self.server = server
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.timings: Any = None
        self.model = ""
        self.logprobs: list[Any] = []
        """Each streamed token's `logprobs.content` entry."""
        self.others: dict[int, StreamedReply] = {}
        """The other completions by choice index."""
        self._finished: StreamedReply = self
        """The completion that finished last: the one a choiceless usage chunk is about."""

    @property
    def started(self) -> bool:
        """Whether anything of the answer has arrived (text, reasoning or a tool call)."""
        return any(self.text) or any(self.reasoning) or bool(self.calls)

    def feed(self, payload: str, event: str = "message") -> ChatDelta | None:
        """Take one server-sent event's data; the text it adds to the first completion, if any.

        Raises:
            BackendError: The server reported an error inside the stream.
            InvalidResponse: A chunk that is not JSON.
        """
        payload = payload.strip()
        if not payload or payload == "[DONE]":
            return None
        try:
            chunk = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise InvalidResponse(
                f"{self.server} at {self.url} streamed a chunk that is not JSON ({exc}): "
                f"{payload[:200]!r}"
            ) from exc
        if not isinstance(chunk, dict):
            raise InvalidResponse(f"{self.server} at {self.url} streamed {payload[:200]!r}")
        if event == "error" or "error" in chunk or chunk.get("object") == "error":
            # `{"error": {...}}`, vLLM's flat `{"object": "error", "message": ...}`, or bare
            raise http_error(500, chunk, self.url, server=self.server)
        self.model = str(chunk.get("model") or self.model)
        text = reasoning = ""
        for choice in chunk.get("choices") or []:
            index = choice.get("index") or 0
            reply = self if index == 0 else self.others.setdefault(index, self._other())
            added, thought = reply._take(choice)
            if reply is self:
                text, reasoning = text + added, reasoning + thought
            if choice.get("finish_reason"):
                self._finished = reply
        last = self._finished
        last.usage = chunk.get("usage") or last.usage
        last.timings = chunk.get("timings") or last.timings
        return ChatDelta(text, reasoning) if text or reasoning else None

    def _other(self) -> StreamedReply:
        reply = StreamedReply(self.url, self.server)
        reply.model = self.model
        return reply

    def _take(self, choice: dict[str, Any]) -> tuple[str, str]:
        """Add one choice's delta to this completion; the text and reasoning it adds."""
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        delta = choice.get("delta") or {}
        text = delta.get("content") or ""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        for i, call in enumerate(delta.get("tool_calls") or []):
            # Each call arrives in pieces under its index: id and name first, then the
            # arguments' JSON text in fragments.
            slot = self.calls.setdefault(
                call.get("index", i), {"id": "", "name": "", "arguments": ""}
            )
            slot["id"] = call.get("id") or slot["id"]
            function = call.get("function") or {}
            slot["name"] += function.get("name") or ""
            slot["arguments"] += function.get("arguments") or ""
        logprobs = choice.get("logprobs")
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        if isinstance(content, list):
            self.logprobs += content
        self.text.append(text)
        self.reasoning.append(reasoning)
        return text, reasoning

    def sample_bodies(self) -> list[dict[str, Any]]:
        """The other completions' bodies (`body`), by choice index."""
        return [self.others[i].body() for i in sorted(self.others)]

    def body(self) -> dict[str, Any]:
        """What the non-streaming endpoint would have answered (for `parse_chat_response`)."""
        message: dict[str, Any] = {"content": "".join(self.text)}
        if any(self.reasoning):
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
                for _, c in sorted(self.calls.items())
            ]
        body: dict[str, Any] = {
            "model": self.model,
            "choices": [{"message": message, "finish_reason": self.finish_reason}],
        }
        if self.logprobs:
            body["choices"][0]["logprobs"] = {"content": self.logprobs}
        if self.usage is not None:
            body["usage"] = self.usage
        if self.timings is not None:
            body["timings"] = self.timings
        return body


class PromptMemo:
    """Exact counts of whole chat prompts, keyed by the request body, least recently used out.

    The budget engine counts the assembled prompt and the backend counts it again before
    sending; with one memo shared by the counter and the backend the second count is free.
    Thread-safe: prompt assembly counts from worker threads.
    """

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._items: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(body: dict[str, Any]) -> str:
        """The memo key of a request body."""
        return json.dumps(body, sort_keys=True, ensure_ascii=False)

    def get(self, key: str) -> int | None:
        """The memoised count, if any."""
        with self._lock:
            n = self._items.get(key)
            if n is not None:
                self._items.move_to_end(key)
            return n

    def put(self, key: str, n: int) -> None:
        """Remember a count."""
        with self._lock:
            self._items[key] = n
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every count (the server changed)."""
        with self._lock:
            self._items.clear()


class ServerCounter(TokenizerCounter):
    """Exact counts from a server's own tokenizer endpoints.

    A whole chat is counted as the server renders it (`_count_chat`), memoised per request body
    (`prompt_memo`, shared with the backend). Synchronous on purpose: prompt assembly counts
    hundreds of chunks from a worker thread (`HttpServer.blocking`). Subclasses give `_encode`,
    `_decode` and `_count_chat`.
    """

    blocking = True

    def __init__(
        self,
        kind: str,
        base_url: str,
        *,
        server: str,
        how_to_start: str,
        timeout: float = 30.0,
        memo: PromptMemo | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = base_url
        self.server = server
        self.http = HttpServer(
            base_url,
            server=server,
            how_to_start=lambda: how_to_start,
            timeout=timeout,
            headers=headers,
        )
        self.prompt_memo = memo or PromptMemo()
        super().__init__(kind, self._encode, self._decode)

    @abstractmethod
    def _encode(self, text: str) -> list[int]:
        """Token ids of `text` as message content."""

    @abstractmethod
    def _decode(self, ids: Sequence[int]) -> str:
        """The text of `ids`."""

    @abstractmethod
    def _count_chat(self, body: dict[str, Any]) -> int:
        """Prompt tokens of a `chat_body`, as the server evaluates it."""

    def _post_raw(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return self.http.blocking(self.http.request("POST", path, body))

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        status, data = self._post_raw(path, body)
        if status != 200:
            raise http_error(status, data, self.base_url, server=self.server)
        return data

    def count_messages(
        self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None = None
    ) -> int:
        """Tokens of the chat prompt exactly as the server will evaluate it (memoised)."""
        body = chat_body(messages, tools)
        key = PromptMemo.key(body)
        n = self.prompt_memo.get(key)
        if n is None:
            n = self._count_chat(body)
            self.prompt_memo.put(key, n)
        return n

    def forget(self) -> None:
        """Drop memoised counts (the server now runs another model or template)."""
        self._memo.clear()
        self.prompt_memo.clear()

    def close(self) -> None:
        """Close the pooled connections."""
        self.http.close()


class OpenAICompatBackend(Backend):
    """A server with `/v1/chat/completions` at `base_url`: transport, streaming chat, health.

    Subclasses implement `context_window`, `token_counter` (and `count_prompt` where the
    server counts a whole chat), `pool`, `_how_to_start` and, where they cache what they read,
    `_forget`.

    Args:
        base_url: e.g. `http://127.0.0.1:8083` (no query).
        server: What runs there, in messages (`llama-server`, `OpenAI-compatible server`).
        timeout: Seconds one chat may take (prompt processing plus generation).
        connect_timeout: Seconds to open a connection.
        load_wait: Longest wait (seconds) for a server that answers 503 while loading.
        precheck: Count every prompt exactly before sending and refuse (ContextOverflow) what
            cannot fit with `max_tokens` of output; the server would refuse it anyway, but
            only after queueing it.
        health_path: What answers 200 once the model is loaded.
        headers: Sent with every request (e.g. `Authorization`).
    """

    supports_tools = True
    supports_json_schema = True  # response_format json_schema

    def __init__(
        self,
        base_url: str,
        *,
        server: str,
        timeout: float = 600.0,
        connect_timeout: float = 5.0,
        load_wait: float = 120.0,
        precheck: bool = True,
        health_path: str = "/health",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = headers or {}
        self.server = server
        self.precheck = precheck
        self.http = HttpServer(
            self.base_url,
            server=server,
            how_to_start=self._how_to_start,
            timeout=timeout,
            connect_timeout=connect_timeout,
            load_wait=load_wait,
            health_path=health_path,
            headers=self.headers,
            on_failure=self._forget,  # whatever answers at this URL next may be another server
        )

    @abstractmethod
    def _how_to_start(self) -> str:
        """A sentence telling the user how to start the server."""

    def _forget(self) -> None:
        """Drop what was read from the server (it may have restarted with other settings)."""

    def _extra_body(self) -> dict[str, Any]:
        """Fields this kind of server adds to every chat request."""
        return {}

    # -- transport --------------------------------------------------------------------------

    async def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, Any]:
        """One request through the server's `HttpServer`: status and JSON body."""
        return await self.http.request(method, path, body)

    def _refusal(self, status: int, data: Any, counted: int | None = None) -> BackendError:
        """The collective error for a non-200 answer; an overflow forgets the cached window."""
        error = http_error(status, data, self.base_url, server=self.server, counted=counted)
        if isinstance(error, ContextOverflow | PoolExhausted):
            # The server differs from what we planned for (restarted, other model?).
            self._forget()
        return error

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request; a 503 while loading is waited out once (bounded by `load_wait`)."""
        return await self.http.call(method, path, body, refuse=self._refusal)

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the health path answers 200 (the model is loaded); see `HttpServer`."""
        await self.http.wait_ready(timeout)

    # -- chat -------------------------------------------------------------------------------

    def _chat_request(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None,
        *,
        max_tokens: int,
        temperature: float,
        stop: Sequence[str] | None,
        json_schema: dict[str, Any] | None,
        tool_choice: str | None,
        seed: int | None = None,
        n: int = 1,
    ) -> dict[str, Any]:
        """The streaming `/v1/chat/completions` body."""
        body = chat_body(messages, tools) | self._extra_body()
        body |= {
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if not tools:  # the chosen tokens' log-probabilities (`collective.models.confidence`)
            body |= {"logprobs": True, "top_logprobs": 1}
        if seed is not None:
            body["seed"] = seed
        if n > 1:
            body["n"] = n  # llama-server: `n_cmpl`, the prompt read once
        if stop:
            body["stop"] = list(stop)
        if tools and tool_choice:
            body["tool_choice"] = tool_choice
        if json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": json_schema, "strict": True},
            }
        return body

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
        n: int = 1,
    ) -> AsyncIterator[ChatDelta]:
        """Stream a chat from `/v1/chat/completions` as server-sent events (see `Backend.stream`).

        Usage (and timings, where the server reports them) come from the final chunk; tool
        calls and reasoning are assembled from their deltas. Closing the stream closes the
        connection, and the server then stops generating and frees the slot. With `n` > 1 the
        first completion streams and the others come in the result's `samples`.
        """
        counted: int | None = None
        count_ms = None
        if self.precheck:
            started = time.perf_counter()
            counted = await self._check_fits(messages, tools, max_tokens)
            count_ms = (time.perf_counter() - started) * 1000
        body = self._chat_request(
            messages,
            tools,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=stop,
            json_schema=json_schema,
            tool_choice=tool_choice,
            seed=seed,
            n=n,
        )
        sent = time.perf_counter()
        reply = StreamedReply(self.base_url, self.server)
        events = self.http.stream(
            CHAT_PATH, body, refuse=lambda status, data: self._refusal(status, data, counted)
        )
        async with contextlib.aclosing(events):
            async for event, data in events:
                delta = reply.feed(data, event)
                if delta is not None:
                    yield delta
        wall_ms = (time.perf_counter() - sent) * 1000
        parse = functools.partial(
            parse_chat_response, url=self.base_url, wall_ms=wall_ms, server=self.server
        )
        result = parse(reply.body())
        if reply.others:
            result = dataclasses.replace(result, samples=list(map(parse, reply.sample_bodies())))
        if tools:
            result = dataclasses.replace(result, confidence_note=WITH_TOOLS)
        if count_ms is not None:
            result.timings["count_ms"] = count_ms
        if counted is not None and result.usage.prompt_tokens > counted:
            self._undercounted(result, counted)
        yield ChatDelta(result=result)

    def _undercounted(self, result: ChatResult, counted: int) -> None:
        """The server counted more prompt tokens than the precheck did (`counted`)."""

    async def _check_fits(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None,
        max_tokens: int,
    ) -> int:
        """Refuse a prompt that cannot fit with `max_tokens` of output; the prompt's count.

        Raises:
            ContextOverflow: It cannot fit (nothing was sent).
        """
        n_ctx = await self.context_window()
        n_prompt = await self.count_prompt(messages, tools)
        if n_prompt + max_tokens > n_ctx:
            raise ContextOverflow(
                f"the prompt for {self.server} at {self.base_url} has {n_prompt} tokens and "
                f"{max_tokens} are reserved for output, but its slots hold {n_ctx}. Refit "
                f"the prompt to n_ctx={n_ctx} (nothing was sent).",
                n_prompt_tokens=n_prompt,
                n_ctx=n_ctx,
            )
        return n_prompt

    async def health(self) -> Health:
        """`health_path`: ok, loading (503) or unreachable; never raises."""
        try:
            status, _ = await self._request("GET", self.http.health_path)
        except BackendError as exc:
            return Health(False, str(exc))
        if status == 200:
            return Health(True, f"{self.server} at {self.base_url} is ready")
        if status == 503:
            return Health(False, f"{self.server} at {self.base_url} is loading its model")
        return Health(
            False,
            f"{self.server} at {self.base_url} answered {self.http.health_path} with HTTP {status}",
        )

    async def aclose(self) -> None:
        """Close this loop's pooled connections."""
        await self.http.aclose()
