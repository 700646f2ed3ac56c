"""llama.cpp's `llama-server` over HTTP (OpenAI-compatible chat plus its native endpoints).

What the server really offers is read from the server, never from its command line:

* `/props` reports the per-slot context (`default_generation_settings.n_ctx`; some builds put
  it at the top level). `--ctx-size` is split across `--parallel` slots and capped at the
  model's training context, so `-c 8192 -np 2` gives 4,096 tokens per request.
* Prompts are counted by the server itself: `/v1/chat/completions/input_tokens` where the build
  has it (one round trip), else `/apply-template` (renders the chat exactly as
  `/v1/chat/completions` will) then `/tokenize` with `add_special` (tokenizes it as the server
  does). Either count equals the server's `usage.prompt_tokens`.
* `/health` answers 503 while the model loads; collective waits for it, for a bounded time.
* A prompt that does not fit is answered with HTTP 400 `exceed_context_size_error` carrying
  `n_prompt_tokens` and `n_ctx`; it becomes `ContextOverflow` with those numbers, and the
  cached `n_ctx` is dropped so the next plan uses the server's current value.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from collective.budget.counting import ChatMessage, TokenizerCounter
from collective.errors import (
    BackendError,
    BackendUnavailable,
    ContextOverflow,
    InvalidResponse,
    PoolExhausted,
)
from collective.models._transport import LoopLocal, parse_json, translate_transport_error
from collective.models.admission import KV_POOL_MODES, POOL_TTL_S, ServerPool, llama_server_pool
from collective.models.base import (
    Backend,
    ChatDelta,
    ChatResult,
    Health,
    ToolCall,
    Usage,
)
from collective.models.special_tokens import escape_messages, escape_specials

__all__ = [
    "CountRoute",
    "LlamaServerBackend",
    "LlamaServerCounter",
    "PromptMemo",
    "parse_chat_response",
]

log = logging.getLogger(__name__)

_SERVER = "llama-server"


def _how_to_start(base_url: str) -> str:
    port = urlsplit(base_url).port or 8080
    return (
        f"Start it with `ops/llama-server/launch.sh --port {port}` (the embedded gemma model) "
        f"or `llama-server -m MODEL.gguf --host 127.0.0.1 --port {port}`."
    )


def _chat_body(
    messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None
) -> dict[str, Any]:
    # Content is untrusted: escaped so the server never parses it as special tokens.
    body: dict[str, Any] = {"messages": escape_messages(messages)}
    if tools:
        body["tools"] = list(tools)
    return body


INPUT_TOKENS_PATH = "/v1/chat/completions/input_tokens"

_LIMITS = httpx.Limits(max_keepalive_connections=16, keepalive_expiry=2.0)
"""Idle connections are dropped after 2 s, before llama-server's own keep-alive timeout (5 s)
closes them: a request sent on a connection the server is closing fails with 'Server
disconnected' (calls waiting for KV room leave connections idle that long)."""


class CountRoute:
    """Which way the server counts prompts; learnt once, shared by a backend and its counter.

    Args:
        mode: `auto` (the input-tokens endpoint, falling back to `/apply-template` +
            `/tokenize` where the build lacks it), `input_tokens` or `apply_template`.
    """

    def __init__(self, mode: str = "auto") -> None:
        if mode not in ("auto", "input_tokens", "apply_template"):
            raise ValueError(f"unknown count mode {mode!r}")
        self.input_tokens: bool | None = {"auto": None, "input_tokens": True}.get(mode, False)
        self.forced = mode != "auto"

    def unsupported(self, status: int) -> bool:
        """Record a refusal of the input-tokens endpoint; True when it means 'not built in'."""
        if status in (404, 405, 501) and not self.forced:
            self.input_tokens = False
            return True
        return False


def _input_tokens(data: Any, url: str) -> int:
    n = data.get("input_tokens") if isinstance(data, dict) else None
    if not isinstance(n, int):
        raise InvalidResponse(f"{_SERVER} at {url}: {INPUT_TOKENS_PATH} gave no input_tokens")
    return n


def _template_prompt(data: Any, url: str) -> str:
    prompt = data.get("prompt") if isinstance(data, dict) else None
    if not isinstance(prompt, str):
        raise InvalidResponse(f"{_SERVER} at {url}: /apply-template gave no prompt")
    return prompt


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


class LlamaServerCounter(TokenizerCounter):
    """Exact counts from the server's own tokenizer (`kind` `exact:llama-server`).

    Synchronous on purpose: prompt assembly counts hundreds of chunks from a worker thread, and
    a blocking pooled `httpx.Client` is the cheapest way to do that.
    """

    blocking = True

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        memo: PromptMemo | None = None,
        route: CountRoute | None = None,
    ) -> None:
        self.base_url = base_url
        self._client = httpx.Client(base_url=base_url, timeout=timeout, limits=_LIMITS)
        self.prompt_memo = memo or PromptMemo()
        self.route = route or CountRoute()
        super().__init__("exact:llama-server", self._encode, self._decode)

    def _post_raw(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        try:
            response = self._client.post(path, json=body)
        except httpx.HTTPError as exc:
            raise translate_transport_error(
                exc, server=_SERVER, url=self.base_url, how_to_start=_how_to_start(self.base_url)
            ) from exc
        return response.status_code, parse_json(response, server=_SERVER, url=self.base_url)

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        status, data = self._post_raw(path, body)
        if status != 200:
            raise _http_error(status, data, self.base_url)
        return data

    def _encode(self, text: str) -> list[int]:
        # As the chat path sees content: escaped (special_tokens.py), specials parsed.
        body = {"content": escape_specials(text), "add_special": False}
        data = self._post("/tokenize", body)
        return _int_list(data, "tokens", self.base_url)

    def _decode(self, ids: Sequence[int]) -> str:
        data = self._post("/detokenize", {"tokens": list(ids)})
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, str):
            raise InvalidResponse(f"{_SERVER} at {self.base_url}: /detokenize gave {data!r}")
        return content

    def count_messages(
        self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None = None
    ) -> int:
        """Tokens of the chat prompt exactly as the server will evaluate it (memoised)."""
        body = _chat_body(messages, tools)
        key = PromptMemo.key(body)
        n = self.prompt_memo.get(key)
        if n is not None:
            return n
        if self.route.input_tokens is not False:
            status, data = self._post_raw(INPUT_TOKENS_PATH, body)
            if status == 200:
                n = _input_tokens(data, self.base_url)
            elif not self.route.unsupported(status):
                raise _http_error(status, data, self.base_url)
        if n is None:
            prompt = _template_prompt(self._post("/apply-template", body), self.base_url)
            data = self._post("/tokenize", {"content": prompt, "add_special": True})
            n = len(_int_list(data, "tokens", self.base_url))
        self.prompt_memo.put(key, n)
        return n

    def forget(self) -> None:
        """Drop memoised counts (the server now runs another model or template)."""
        self._memo.clear()
        self.prompt_memo.clear()

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()


def _int_list(data: Any, key: str, url: str) -> list[int]:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, list) or not all(isinstance(t, int) for t in value):
        raise InvalidResponse(f"{_SERVER} at {url}: expected a list of token ids in {key!r}")
    return value


def _http_error(status: int, data: Any, url: str) -> BackendError:
    """The collective error for a non-200 JSON answer from llama-server."""
    error = data.get("error") if isinstance(data, dict) else None
    error = error if isinstance(error, dict) else {"message": str(data)}
    kind, message = error.get("type", ""), error.get("message", "")
    if kind == "exceed_context_size_error":
        n_prompt, n_ctx = error.get("n_prompt_tokens"), error.get("n_ctx")
        if isinstance(n_prompt, int) and isinstance(n_ctx, int):
            return ContextOverflow(
                f"{_SERVER} at {url} refused a prompt of {n_prompt} tokens: its slots hold "
                f"{n_ctx} tokens ({message}). Refit the prompt to n_ctx={n_ctx}.",
                n_prompt_tokens=n_prompt,
                n_ctx=n_ctx,
            )
    if status >= 500 and "Context size has been exceeded" in message:
        # Not this request's prompt: the requests in flight together outgrew a shared KV pool,
        # and llama.cpp failed every active slot. Sending the same again fails again.
        return PoolExhausted(
            f"{_SERVER} at {url} ran out of KV pool under concurrent requests ({message}); its "
            "slots share one pool (unified KV: no -np, or --kv-unified). collective re-reads "
            "the server and waits for room; if it recurs, give the server -np K (independent "
            "slots) or a larger -c"
        )
    if status == 503:
        return BackendUnavailable(
            f"{_SERVER} at {url} is not ready ({message or 'HTTP 503'}); it is loading the model "
            "or all slots are busy. Wait and retry."
        )
    if status >= 500 and "does not match the expected" in message:
        # The model wrote something its template's tool-call format cannot parse: the server is
        # fine, the answer is not (small models do this).
        return InvalidResponse(
            f"{_SERVER} at {url} could not parse the model's answer ({message}); the model may "
            "not be able to call tools: run that role without tools"
        )
    if status >= 500:
        return BackendUnavailable(f"{_SERVER} at {url} failed with HTTP {status}: {message}")
    return InvalidResponse(
        f"{_SERVER} at {url} rejected the request with HTTP {status} ({kind}): {message}"
    )


def parse_chat_response(data: Any, *, url: str, wall_ms: float) -> ChatResult:
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
            f"{_SERVER} at {url} sent a completion without {exc}: {str(data)[:200]!r}"
        ) from exc
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
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
                f"{_SERVER} at {url} sent a malformed tool call ({exc}): {call!r}"
            ) from exc
    raw_timings = data.get("timings") or {}
    timings = {
        k: float(v)
        for k, v in raw_timings.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    timings["wall_ms"] = wall_ms
    return ChatResult(
        text=message.get("content") or "",
        usage=Usage(prompt_tokens, completion_tokens, cached if isinstance(cached, int) else None),
        model=str(data.get("model", "")),
        finish_reason=choice.get("finish_reason"),
        tool_calls=calls,
        timings=timings,
        reasoning=message.get("reasoning_content") or None,
    )


class _StreamedReply:
    """Assembles `/v1/chat/completions` server-sent events into the non-streaming body."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.timings: Any = None
        self.model = ""

    def feed(self, line: str) -> ChatDelta | None:
        """Take one line of the event stream; the text it adds, if any.

        Raises:
            BackendError: The server reported an error inside the stream.
            InvalidResponse: A chunk that is not JSON.
        """
        field, _, payload = line.partition(":")
        payload = payload.strip()
        if field not in ("data", "error") or not payload or payload == "[DONE]":
            return None
        try:
            chunk = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise InvalidResponse(
                f"{_SERVER} at {self.url} streamed a chunk that is not JSON ({exc}): "
                f"{payload[:200]!r}"
            ) from exc
        if not isinstance(chunk, dict):
            raise InvalidResponse(f"{_SERVER} at {self.url} streamed {payload[:200]!r}")
        if field == "error" or "error" in chunk:
            raise _http_error(500, chunk if "error" in chunk else {"error": chunk}, self.url)
        self.model = str(chunk.get("model") or self.model)
        self.usage = chunk.get("usage") or self.usage
        self.timings = chunk.get("timings") or self.timings
        text = reasoning = ""
        for choice in chunk.get("choices") or []:
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
            delta = choice.get("delta") or {}
            text += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
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
        self.text.append(text)
        self.reasoning.append(reasoning)
        return ChatDelta(text, reasoning) if text or reasoning else None

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
        if self.usage is not None:
            body["usage"] = self.usage
        if self.timings is not None:
            body["timings"] = self.timings
        return body


class LlamaServerBackend(Backend):
    """A `llama-server` at `base_url`.

    Args:
        base_url: e.g. `http://127.0.0.1:8083`.
        timeout: Seconds one chat may take (prompt processing plus generation).
        connect_timeout: Seconds to open a connection.
        load_wait: Longest wait (seconds) for a server that answers 503 while loading.
        precheck: Count every prompt exactly before sending and refuse (ContextOverflow) what
            cannot fit with `max_tokens` of output; the server would refuse it anyway, but
            only after queueing it for a slot.
        count_mode: How the server counts prompts: `auto` (input-tokens endpoint, else
            `/apply-template` + `/tokenize`), `input_tokens` or `apply_template`.
        kv_pool: How the slots share KV memory (`collective.models.admission.KV_POOL_MODES`);
            default from the URL's `?kv=` (`llama-server:http://HOST:PORT?kv=per-slot`), else
            `auto`.

    `/props` (and `/slots`) are re-read at most every `POOL_TTL_S` seconds and at once after
    a failed request, so a restarted server is planned for as it is now.
    """

    supports_tools = True  # refined from /props `chat_template_caps` at discovery
    supports_json_schema = True  # response_format json_schema becomes a grammar

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 600.0,
        connect_timeout: float = 5.0,
        load_wait: float = 120.0,
        precheck: bool = True,
        count_mode: str = "auto",
        kv_pool: str | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        kv = kv_pool or (parse_qs(parts.query).get("kv") or ["auto"])[-1]
        if kv not in KV_POOL_MODES:
            raise ValueError(f"kv={kv!r}: use one of {', '.join(KV_POOL_MODES)}")
        self.kv_pool = kv
        base_url = parts._replace(query="", fragment="").geturl()
        self.base_url = base_url.rstrip("/")
        self.spec = f"llama-server:{self.base_url}"
        self.model = _SERVER
        self.load_wait = load_wait
        self.precheck = precheck
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._clients = LoopLocal(
            lambda: httpx.AsyncClient(
                base_url=self.base_url,
                timeout=self._timeout,
                limits=_LIMITS,
            )
        )
        self._n_ctx: int | None = None
        self._pool: ServerPool | None = None
        self._read_at = 0.0
        self._seen: tuple[Any, ...] | None = None
        self._counter: LlamaServerCounter | None = None
        self.prompt_memo = PromptMemo()
        """Exact prompt counts shared with `token_counter()` (see `PromptMemo`)."""
        self.count_route = CountRoute(count_mode)

    # -- transport --------------------------------------------------------------------------

    async def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, Any]:
        client: httpx.AsyncClient = self._clients.get()
        for attempt in (1, 2):
            try:
                response = await client.request(method, path, json=body)
                break
            except httpx.RemoteProtocolError as exc:
                # The server closed a pooled keep-alive connection as the request went out:
                # nothing was processed, so it is sent once more on a fresh connection.
                if attempt == 2 or "without sending a response" not in str(exc):
                    raise self._transport_error(exc) from exc
            except httpx.HTTPError as exc:
                raise self._transport_error(exc) from exc
        return response.status_code, parse_json(response, server=_SERVER, url=self.base_url)

    def _transport_error(self, exc: httpx.HTTPError) -> BackendError:
        """The collective error for a transport failure; forgets what was read from the server."""
        # Whatever comes back at this URL may be another server: re-read, recount.
        self._n_ctx = None
        self.prompt_memo.clear()
        return translate_transport_error(
            exc, server=_SERVER, url=self.base_url, how_to_start=_how_to_start(self.base_url)
        )

    def _refusal(self, status: int, data: Any) -> BackendError:
        """The collective error for a non-200 answer; an overflow forgets the cached window."""
        error = _http_error(status, data, self.base_url)
        if isinstance(error, ContextOverflow | PoolExhausted):
            # The server differs from what we planned for (restarted, other model?).
            self._n_ctx = None
            self.prompt_memo.clear()
        return error

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request; a 503 while loading is waited out once (bounded by `load_wait`)."""
        status, data = await self._request(method, path, body)
        if status == 503:
            await self.wait_ready()
            status, data = await self._request(method, path, body)
        if status != 200:
            raise self._refusal(status, data)
        return data

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until `/health` answers 200 (the model is loaded).

        Raises:
            BackendUnavailable: Still loading after `timeout` (default `load_wait`) seconds, or
                refused.
        """
        deadline = time.monotonic() + (self.load_wait if timeout is None else timeout)
        while True:
            status, _ = await self._request("GET", "/health")
            if status == 200:
                return
            if time.monotonic() >= deadline:
                raise BackendUnavailable(
                    f"{_SERVER} at {self.base_url} was still loading its model after "
                    f"{self.load_wait:g}s (HTTP {status} on /health). Wait for it to finish "
                    "loading, or check its log."
                )
            await asyncio.sleep(0.25)

    # -- discovery --------------------------------------------------------------------------

    async def props(self) -> dict[str, Any]:
        """The server's `/props` (per-slot `n_ctx`, model path, chat template, ...)."""
        data = await self._call("GET", "/props")
        if not isinstance(data, dict):
            raise InvalidResponse(f"{_SERVER} at {self.base_url}: /props is not an object")
        return data

    async def context_window(self) -> int:
        """The per-slot context (tokens), from `/props` read at most `POOL_TTL_S` seconds ago.

        Discovery also sets `model` and `supports_tools` (from the template's capabilities)
        and the server's `pool()`.
        """
        if self._n_ctx is None or time.monotonic() - self._read_at > POOL_TTL_S:
            data = await self.props()
            slots = None
            if data.get("endpoint_slots"):
                status, listed = await self._request("GET", "/slots")
                slots = listed if status == 200 and isinstance(listed, list) else None
            try:
                pool = llama_server_pool(data, slots, server=self.base_url, kv=self.kv_pool)
            except ValueError as exc:
                raise InvalidResponse(f"{_SERVER} at {self.base_url}: {exc}") from exc
            n_ctx = pool.slot_ctx
            seen = (n_ctx, pool.slots, data.get("model_path"), data.get("chat_template"))
            if self._seen is not None and seen != self._seen:
                # Restarted with other slots or another model: counts and plans start over.
                log.warning("%s changed: now %s", self.spec, pool.describe())
                self.prompt_memo.clear()
                if self._counter is not None:
                    self._counter.forget()
            self._seen, self._pool, self._read_at = seen, pool, time.monotonic()
            caps = data.get("chat_template_caps")
            if isinstance(caps, dict) and "supports_tools" in caps:
                # Tools are rendered by the model's chat template; without support they are
                # silently ignored, so say so.
                self.supports_tools = bool(caps["supports_tools"])
            name = data.get("model_alias") or data.get("model_path")
            if isinstance(name, str) and name:
                self.model = PurePosixPath(name).name.removesuffix(".gguf")
            self._n_ctx = n_ctx
        return self._n_ctx

    async def pool(self) -> ServerPool:
        """The server's slots and KV pool, from `/props` and `/slots` (see `context_window`)."""
        await self.context_window()
        assert self._pool is not None
        return self._pool

    async def token_counter(self) -> LlamaServerCounter:
        """The server's own tokenizer (`exact:llama-server`)."""
        if self._counter is None:
            self._counter = LlamaServerCounter(
                self.base_url, memo=self.prompt_memo, route=self.count_route
            )
        return self._counter

    async def count_prompt(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> int:
        """Exact prompt tokens, counted by the server (see the module docstring for the route).

        Memoised per request body in `prompt_memo`, shared with the sync counter.
        """
        body = _chat_body(messages, tools)
        key = PromptMemo.key(body)
        n = self.prompt_memo.get(key)
        if n is not None:
            return n
        if self.count_route.input_tokens is not False:
            status, data = await self._request("POST", INPUT_TOKENS_PATH, body)
            if status == 503:
                await self.wait_ready()
                status, data = await self._request("POST", INPUT_TOKENS_PATH, body)
            if status == 200:
                n = _input_tokens(data, self.base_url)
            elif not self.count_route.unsupported(status):
                raise _http_error(status, data, self.base_url)
        if n is None:
            rendered = await self._call("POST", "/apply-template", body)
            prompt = _template_prompt(rendered, self.base_url)
            data = await self._call("POST", "/tokenize", {"content": prompt, "add_special": True})
            n = len(_int_list(data, "tokens", self.base_url))
        self.prompt_memo.put(key, n)
        return n

    # -- chat -------------------------------------------------------------------------------

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
    ) -> AsyncIterator[ChatDelta]:
        """Stream a chat from `/v1/chat/completions` as server-sent events (see `Backend.stream`).

        Usage and timings come from the final chunk; tool calls and reasoning are assembled
        from their deltas. Closing the stream closes the connection, and llama-server then
        stops generating and frees the slot.
        """
        count_ms = await self._check_fits(messages, tools, max_tokens) if self.precheck else None
        body = _chat_body(messages, tools)
        body |= {
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
            "cache_prompt": True,  # reuse the slot's KV cache for a shared prefix
        }
        if stop:
            body["stop"] = list(stop)
        if tools and tool_choice:
            body["tool_choice"] = tool_choice
        if json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": json_schema, "strict": True},
            }
        client: httpx.AsyncClient = self._clients.get()
        sent = time.perf_counter()
        reply = _StreamedReply(self.base_url)
        for attempt in (1, 2):
            try:
                async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                    if response.status_code == 200:
                        async for line in response.aiter_lines():
                            delta = reply.feed(line)
                            if delta is not None:
                                yield delta
                        break
                    await response.aread()
                    data = parse_json(response, server=_SERVER, url=self.base_url)
            except httpx.RemoteProtocolError as exc:
                # A pooled connection closed by the server as the request went out (nothing
                # was processed or streamed yet): once more on a fresh connection.
                fresh = "without sending a response" in str(exc) and reply.finish_reason is None
                if attempt == 2 or not fresh or any(reply.text):
                    raise self._transport_error(exc) from exc
                continue
            except httpx.HTTPError as exc:
                raise self._transport_error(exc) from exc
            if response.status_code != 503 or attempt == 2:
                raise self._refusal(response.status_code, data)
            await self.wait_ready()  # loading: wait it out once, bounded by load_wait
        result = parse_chat_response(
            reply.body(), url=self.base_url, wall_ms=(time.perf_counter() - sent) * 1000
        )
        if count_ms is not None:
            result.timings["count_ms"] = count_ms
        yield ChatDelta(result=result)

    async def _check_fits(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None,
        max_tokens: int,
    ) -> float:
        """Refuse a prompt that cannot fit with `max_tokens` of output; the counting time (ms).

        Raises:
            ContextOverflow: It cannot fit (nothing was sent).
        """
        started = time.perf_counter()
        n_ctx = await self.context_window()
        n_prompt = await self.count_prompt(messages, tools)
        if n_prompt + max_tokens > n_ctx:
            raise ContextOverflow(
                f"the prompt for {_SERVER} at {self.base_url} has {n_prompt} tokens and "
                f"{max_tokens} are reserved for output, but its slots hold {n_ctx}. Refit "
                f"the prompt to n_ctx={n_ctx} (nothing was sent).",
                n_prompt_tokens=n_prompt,
                n_ctx=n_ctx,
            )
        return (time.perf_counter() - started) * 1000

    async def health(self) -> Health:
        """`/health`: ok, loading (503) or unreachable; never raises."""
        try:
            status, data = await self._request("GET", "/health")
        except BackendError as exc:
            return Health(False, str(exc))
        if status == 200:
            return Health(True, f"{_SERVER} at {self.base_url} is ready")
        if status == 503:
            return Health(False, f"{_SERVER} at {self.base_url} is loading its model")
        return Health(False, f"{_SERVER} at {self.base_url} answered /health with HTTP {status}")

    async def aclose(self) -> None:
        """Close pooled connections (the async ones of this loop and the counter's)."""
        await self._clients.aclose()
        if self._counter is not None:
            self._counter.close()
            self._counter = None
