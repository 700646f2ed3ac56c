"""Ollama over its HTTP API (`/api/chat`, `/api/show`, `/api/tags`, `/api/ps`).

Requests go through `collective.models.http`; the chat body is the official client's
`ChatRequest`.

Ollama never refuses an over-long prompt: it drops old messages (keeping system messages and
the last one) and then cuts tokens from the front of what is left, silently, to fit `num_ctx`.
And `num_ctx` defaults to a small value unless the request or the Modelfile sets it. So this
backend:

* always sends `options.num_ctx` and `options.num_predict`;
* discovers the model from `/api/show`: the architecture's `*.context_length`, any `num_ctx`
  the Modelfile sets, the capabilities (tools, thinking) and the blob path (`FROM`);
* chooses the window it sends (`choose_num_ctx`): the backend's `num_ctx` argument, else the
  Modelfile's `num_ctx`, else the model's `context_length` capped at `DEFAULT_NUM_CTX_CAP`;
  always capped at `context_length` (Ollama itself caps there). The window collective plans for
  is the `num_ctx` it sends, never the model's maximum: that is what Ollama allocates;
* counts the prompt before sending with the best counter it can build (tiktoken
  `o200k_harmony` for gpt-oss; the GGUF's own vocabulary when the blob is on this host; else
  the calibrated estimate) and refuses what does not fit (`ContextOverflow`, nothing sent);
* sends `"truncate": false` and `"shift": false` (the official client 0.6's request model
  does not have them), so a current Ollama answers an over-long prompt with HTTP 400 instead
  of cutting it; that 400 becomes `ContextOverflow` (see `overflow_from_refusal`);
* compares Ollama's `prompt_eval_count` with that count after the reply and reports a
  truncation loudly (`ChatResult.warnings` and a log warning; see `truncation_warning`): the
  second line, for servers too old to honour `truncate`;
* describes its pool from `/api/ps` (the `context_length` the model is loaded with) and
  `OLLAMA_NUM_PARALLEL` (requests run at once per model; default 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from collective import environment
from collective.budget.counting import (
    ChatMessage,
    EstimateCounter,
    TokenCounter,
    tiktoken_counter,
)
from collective.errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    ContextOverflow,
    InvalidResponse,
)
from collective.models.admission import POOL_TTL_S, ServerPool
from collective.models.base import (
    Backend,
    ChatDelta,
    ChatResult,
    Health,
    ToolCall,
    Usage,
)
from collective.models.http import HttpServer
from collective.models.registry import BackendKind, BackendSpec, checked_url, refuse, register
from collective.models.special_tokens import escape_messages

__all__ = [
    "DEFAULT_NUM_CTX_CAP",
    "DEFAULT_OLLAMA_URL",
    "HARMONY_PREAMBLE_TOKENS",
    "OLLAMA_DEFAULT_NUM_CTX",
    "OllamaBackend",
    "OllamaModelInfo",
    "choose_num_ctx",
    "ollama_host_url",
    "ollama_pool",
    "overflow_from_refusal",
    "parse_show",
    "truncation_warning",
    "usage_from_response",
]

log = logging.getLogger(__name__)

_SERVER = "Ollama"

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"

OLLAMA_DEFAULT_NUM_CTX = 4096
"""Ollama's documented default `num_ctx`, used when nothing else is known."""

DEFAULT_NUM_CTX_CAP = 32768
"""Largest window collective asks for when neither config nor Modelfile sets `num_ctx`: Ollama
allocates the KV cache for the whole `num_ctx` it is sent."""

HARMONY_PREAMBLE_TOKENS = 128
"""Tokens reserved for the system preamble Ollama's gpt-oss template adds (model identity,
knowledge cutoff, date, reasoning level, channel list): tiktoken counts only what we send."""


@dataclass(frozen=True)
class OllamaModelInfo:
    """What `/api/show` says about a model."""

    context_length: int | None
    """The architecture's `*.context_length` (training context)."""
    modelfile_num_ctx: int | None
    """`PARAMETER num_ctx` from the Modelfile, if set."""
    architecture: str = ""
    blob: str | None = None
    """The GGUF path from the Modelfile's `FROM` line (a path on the Ollama host)."""
    capabilities: list[str] = field(default_factory=list)


def parse_show(data: Mapping[str, Any]) -> OllamaModelInfo:
    """Parse an `/api/show` body (as a plain mapping)."""
    info = data.get("model_info") or data.get("modelinfo") or {}
    context_length = None
    for key, value in info.items():
        if key.endswith(".context_length") and isinstance(value, int | float):
            context_length = int(value)
    num_ctx = None
    for line in str(data.get("parameters") or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "num_ctx" and parts[1].isdigit():
            num_ctx = int(parts[1])
    blob = None
    for line in str(data.get("modelfile") or "").splitlines():
        if line.startswith("FROM "):
            blob = line[5:].strip()
    return OllamaModelInfo(
        context_length=context_length,
        modelfile_num_ctx=num_ctx,
        architecture=str(info.get("general.architecture") or ""),
        blob=blob,
        capabilities=[str(c) for c in data.get("capabilities") or []],
    )


def choose_num_ctx(
    *, requested: int | None, modelfile_num_ctx: int | None, context_length: int | None
) -> int:
    """The `num_ctx` collective sends (and so the window it plans for).

    Config beats the Modelfile, which beats the model's own context capped at
    `DEFAULT_NUM_CTX_CAP`; the result never exceeds `context_length`, where Ollama caps it.
    """
    if requested:
        n = requested
    elif modelfile_num_ctx:
        n = modelfile_num_ctx
    elif context_length:
        n = min(context_length, DEFAULT_NUM_CTX_CAP)
    else:
        n = OLLAMA_DEFAULT_NUM_CTX
    return min(n, context_length) if context_length else n


def usage_from_response(data: Mapping[str, Any]) -> tuple[Usage, dict[str, float]]:
    """Usage and llama-server-style timings from an Ollama chat response's counters.

    `prompt_eval_count` is the whole prompt; current Ollama adds `prompt_eval_cached_count`, the
    tokens of it read from the KV cache (`cache_n`; absent on servers before it, and when 0).
    """
    prompt = int(data.get("prompt_eval_count") or 0)
    completion = int(data.get("eval_count") or 0)
    cached = data.get("prompt_eval_cached_count")
    cached = int(cached) if isinstance(cached, int) else None
    timings: dict[str, float] = {"prompt_n": float(prompt), "predicted_n": float(completion)}
    if cached is not None:
        timings["cache_n"] = float(cached)
    for key, name in (
        ("prompt_eval_duration", "prompt_ms"),
        ("eval_duration", "predicted_ms"),
        ("load_duration", "load_ms"),
        ("total_duration", "total_ms"),
    ):
        if data.get(key):
            timings[name] = data[key] / 1e6
    if completion and data.get("eval_duration"):
        timings["predicted_per_second"] = completion / (data["eval_duration"] / 1e9)
    if prompt and data.get("prompt_eval_duration"):
        timings["prompt_per_second"] = prompt / (data["prompt_eval_duration"] / 1e9)
    return Usage(prompt, completion, cached), timings


def truncation_warning(
    *,
    counted: int,
    counter: TokenCounter,
    template_exact: bool,
    prompt_eval_count: int | None,
    num_ctx: int,
    n_messages: int,
    model: str,
    content_tokens: int | None = None,
) -> str | None:
    """A loud warning when Ollama's `prompt_eval_count` shows the prompt was truncated.

    Args:
        counted: Our count of the prompt before sending.
        counter: The counter that made it (exactness decides how much difference is noise).
        template_exact: Whether the count rendered the template Ollama renders (a GGUF
            vocabulary count renders the GGUF's Jinja template or llama.cpp's ChatML fallback;
            Ollama renders its own Go template, which may cost more or fewer tokens).
        prompt_eval_count: What Ollama reported (None when it reported nothing).
        num_ctx: The window that was sent.
        n_messages: Messages in the prompt.
        model: For the message.
        content_tokens: The messages' content alone, by the same exact counter. When the
            template is not Ollama's, only content is certain: evaluating fewer tokens than the
            content (less a boundary allowance of 2 per message) means content was dropped.

    Returns:
        The warning text, or None when the reply shows the whole prompt was evaluated.
    """
    if prompt_eval_count is None:
        return None
    head = f"OLLAMA TRUNCATED THE PROMPT for {model}: "
    if prompt_eval_count >= num_ctx:
        return head + (
            f"it evaluated {prompt_eval_count} tokens, the whole num_ctx={num_ctx} window, while "
            f"collective counted {counted} ({counter.kind}); the start of the prompt was cut. "
            "Lower the prompt budget or raise num_ctx."
        )
    if counter.exact:
        if template_exact:
            floor = counted
        elif content_tokens is not None:
            floor = content_tokens - 2 * n_messages
        else:
            floor = counted - 8 - 16 * n_messages  # template overhead unknown: be generous
        if prompt_eval_count < floor:
            return head + (
                f"it evaluated {prompt_eval_count} tokens but the prompt has {counted} "
                f"({counter.kind}, {content_tokens} of them content); about "
                f"{counted - prompt_eval_count} tokens (old messages or their start) were dropped."
            )
        return None
    # An estimate errs high on purpose, so only a large shortfall means dropped messages.
    safety = getattr(counter, "safety_factor", 1.0)
    if prompt_eval_count * safety * 2 < counted:
        return head + (
            f"it evaluated {prompt_eval_count} tokens where collective estimated {counted} "
            f"({counter.kind}); old messages were probably dropped."
        )
    return None


def ollama_pool(
    loaded_context: int | None, *, server: str, num_ctx: int, num_parallel: int
) -> ServerPool:
    """The pool of one model on Ollama.

    Args:
        loaded_context: `context_length` of the model in `/api/ps` (None: not loaded now).
        server: The server's URL and model.
        num_ctx: The window collective sends with every request.
        num_parallel: Requests Ollama runs at once per model (`OLLAMA_NUM_PARALLEL`).
    """
    # Ollama reloads the model when a request asks for another num_ctx, so the window a
    # request gets is the one it sends; /api/ps says what is loaded now.
    slot_ctx = num_ctx
    source = f"num_ctx sent, OLLAMA_NUM_PARALLEL={num_parallel}"
    if loaded_context:
        source = f"/api/ps context_length {loaded_context}, " + source
    return ServerPool(server, num_parallel, slot_ctx, num_parallel * slot_ctx, False, source)


def overflow_from_refusal(
    status: int, message: str, *, counted: int, num_ctx: int, model: str, url: str
) -> ContextOverflow | None:
    """The `ContextOverflow` for Ollama's refusal of an over-long prompt (`truncate: false`).

    Current Ollama answers HTTP 400 `the input length exceeds the context length`; numbers in
    the message (`... (5000 tokens) ... (4096 tokens)`) are the server's own counts, else our
    count and the `num_ctx` sent stand in. None when the refusal is about something else.
    """
    if status != 400 or "exceeds the context length" not in message:
        return None
    numbers = [int(n) for n in re.findall(r"(\d+) tokens", message)]
    n_prompt, n_ctx = (numbers[0], numbers[1]) if len(numbers) >= 2 else (counted, num_ctx)
    return ContextOverflow(
        f"{_SERVER} at {url} refused the prompt for {model} ({message}): {n_prompt} tokens do "
        f"not fit num_ctx {n_ctx}, and collective asked it not to truncate. Refit the prompt "
        f"to n_ctx={n_ctx}.",
        n_prompt_tokens=n_prompt,
        n_ctx=n_ctx,
    )


def chat_request(**fields: Any) -> dict[str, Any]:
    """The streaming `/api/chat` body: the official client's `ChatRequest`, and more.

    `"truncate": false` and `"shift": false` are added: its model does not have them.
    """
    from ollama._types import ChatRequest

    body = ChatRequest(stream=True, **fields).model_dump(exclude_none=True)
    return body | {"truncate": False, "shift": False}


def _is_local(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1", "0.0.0.0") or host == socket.gethostname()


NO_CONFIDENCE = "token log-probabilities are not read from Ollama (its chat API is not asked)"
"""Why an Ollama answer has no `ChatResult.confidence`."""


class OllamaBackend(Backend):
    """A model on an Ollama server.

    Args:
        model: The Ollama model name, e.g. `gpt-oss-120b-judge` or `gemma3:270m`.
        base_url: The server, e.g. `http://127.0.0.1:11434`.
        num_ctx: The window to request; default from the Modelfile or the model (see
            `choose_num_ctx`).
        think: Passed through as `think` (gpt-oss: `low`/`medium`/`high`; others: bool).
        timeout: Seconds one chat may take.
        keep_alive: Passed through (e.g. `30m`).
        counter: Force a counter (default: the best available, see the module docstring).
        num_parallel: Requests the server runs at once for this model; default
            `$OLLAMA_NUM_PARALLEL` where set, else 1 (Ollama's default).
    """

    supports_tools = True  # refined from /api/show capabilities at discovery
    supports_json_schema = True  # `format` takes a JSON schema
    context_fix = " Raise num_ctx (ops/ollama/Modelfile.*) or choose a smaller preset."

    def __init__(
        self,
        model: str,
        base_url: str = "http://127.0.0.1:11434",
        *,
        num_ctx: int | None = None,
        num_parallel: int | None = None,
        think: bool | str | None = None,
        timeout: float = 600.0,
        keep_alive: str | float | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.spec = f"ollama:{model}@{self.base_url}"
        self.num_ctx = num_ctx
        self.think = think
        self.keep_alive = keep_alive
        self.http = HttpServer(
            self.base_url,
            server=_SERVER,
            how_to_start=self._how_to_start,
            timeout=timeout,
            health_path="/api/version",
        )
        self._info: OllamaModelInfo | None = None
        self._counter = counter
        self.num_parallel = num_parallel or environment.ollama_num_parallel()
        self._pool: ServerPool | None = None
        self._pool_at = 0.0

    @property
    def _gpt_oss(self) -> bool:
        # The architecture /api/show reports is authoritative (a custom name such as
        # `judge` may hide gpt-oss, and `gpt-oss-judge` may be another model); the name
        # decides only when the architecture is unknown.
        if self._info is not None and self._info.architecture:
            return self._info.architecture == "gptoss"
        return self.model.lower().rsplit("/", 1)[-1].startswith("gpt-oss")

    def _how_to_start(self) -> str:
        host = urlsplit(self.base_url).netloc
        return (
            f"Start it with `OLLAMA_HOST={host} ollama serve`, then `ollama pull {self.model}` "
            "(or `ollama create` from ops/ollama/Modelfile)."
        )

    def _refused(self, status: int, data: Any) -> BackendError:
        """The collective error for an answer other than 200 (or an error inside a stream)."""
        message = data.get("error", data) if isinstance(data, dict) else data
        if status == 404:
            return BackendUnavailable(
                f"{_SERVER} at {self.base_url} has no model {self.model!r} ({message}). "
                f"Pull it with `ollama pull {self.model}` or create it from a Modelfile."
            )
        if status >= 500:
            return BackendUnavailable(
                f"{_SERVER} at {self.base_url} failed with HTTP {status}: {message}"
            )
        return InvalidResponse(
            f"{_SERVER} at {self.base_url} rejected the request for {self.model} with HTTP "
            f"{status}: {message}"
        )

    # -- discovery --------------------------------------------------------------------------

    async def discover(self, *, refresh: bool = False) -> OllamaModelInfo:
        """`/api/show` for this model, cached (refresh to re-read)."""
        if self._info is None or refresh:
            data = await self.http.call(
                "POST", "/api/show", {"model": self.model}, refuse=self._refused
            )
            self._info = parse_show(data)
            if self._info.capabilities:
                self.supports_tools = "tools" in self._info.capabilities
        return self._info

    async def list_models(self) -> list[str]:
        """The models the server has (`/api/tags`)."""
        listing = await self.http.call("GET", "/api/tags", refuse=self._refused)
        return [str(m["model"]) for m in _models(listing) if m.get("model")]

    async def context_window(self) -> int:
        """The `num_ctx` collective sends with every request (see `choose_num_ctx`)."""
        info = await self.discover()
        return choose_num_ctx(
            requested=self.num_ctx,
            modelfile_num_ctx=info.modelfile_num_ctx,
            context_length=info.context_length,
        )

    async def pool(self) -> ServerPool:
        """This model's pool: `num_parallel` requests of the `num_ctx` sent.

        Read at most every `POOL_TTL_S` seconds, with what `/api/ps` says is loaded.
        """
        if self._pool is None or time.monotonic() - self._pool_at > POOL_TTL_S:
            num_ctx = await self.context_window()
            loaded = None
            with contextlib.suppress(BackendError):  # /api/ps is optional (old servers)
                listing = await self.http.call("GET", "/api/ps", refuse=self._refused)
                for entry in _models(listing):
                    if self.model in (entry.get("model"), entry.get("name")):
                        loaded = entry.get("context_length")
            self._pool = ollama_pool(
                loaded,
                server=f"{self.base_url} ({self.model})",
                num_ctx=num_ctx,
                num_parallel=self.num_parallel,
            )
            self._pool_at = time.monotonic()
        return self._pool

    async def token_counter(self) -> TokenCounter:
        """The best counter: tiktoken for gpt-oss, else a local blob's vocabulary, else estimate."""
        if self._counter is None:
            info = await self.discover()
            counter: TokenCounter | None = None
            if self._gpt_oss:
                counter = tiktoken_counter("o200k_harmony")
            elif info.blob and _is_local(self.base_url) and Path(info.blob).is_file():
                from collective.models.llamacpp_in_process import gguf_vocab_counter

                try:
                    counter = await asyncio.to_thread(gguf_vocab_counter, info.blob)
                except (ConfigError, ImportError) as exc:  # ImportError: no llama-cpp-python here
                    log.warning("%s: cannot read the local blob's vocabulary: %s", self.spec, exc)
            self._counter = counter or EstimateCounter()
        return self._counter

    async def count_prompt(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> int:
        """Prompt tokens as Ollama will see them, by the best counter available.

        Exact for the content with a vocabulary counter; the template is the GGUF's (Ollama's
        Go template may differ by a few tokens per message). gpt-oss adds
        `HARMONY_PREAMBLE_TOKENS` for the system preamble Ollama's template inserts.
        """
        from collective.models.llamacpp_in_process import LlamaCppCounter

        messages = escape_messages(messages)  # as `stream` sends them
        counter = await self.token_counter()
        if isinstance(counter, LlamaCppCounter):
            return await asyncio.to_thread(counter.count_messages, messages, tools)
        n = await asyncio.to_thread(counter.count_messages, messages)
        if tools:
            n += counter.count(json.dumps(list(tools)))
        if self._gpt_oss:
            n += HARMONY_PREAMBLE_TOKENS
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
        seed: int | None = None,
        n: int = 1,  # one completion a request (`most_samples`)
    ) -> AsyncIterator[ChatDelta]:
        """Stream a chat from `/api/chat`, checked before and after (see module doc).

        Usage comes from the final message's `prompt_eval_count`/`eval_count`, and the
        truncation check runs on it as for a whole answer. Closing the stream closes the
        connection.
        """
        messages = escape_messages(messages)  # content is never special tokens (see there)
        num_ctx = await self.context_window()
        counter = await self.token_counter()
        counted = await self._check_fits(messages, tools, max_tokens, num_ctx, counter)
        options: dict[str, Any] = {"num_ctx": num_ctx, "num_predict": max_tokens}
        options |= {"temperature": temperature} | ({"stop": list(stop)} if stop else {})
        options |= {"seed": seed} if seed is not None else {}
        kwargs = self._chat_fields(json_schema, tools)
        started = time.perf_counter()
        text: list[str] = []
        thinking: list[str] = []
        calls: list[Any] = []
        final: dict[str, Any] | None = None
        body = chat_request(
            model=self.model, messages=[dict(m) for m in messages], options=options, **kwargs
        )

        def refused(status: int, data: Any) -> BackendError:
            message = str(data.get("error", data) if isinstance(data, dict) else data)
            overflow = overflow_from_refusal(
                status,
                message,
                counted=counted,
                num_ctx=num_ctx,
                model=self.model,
                url=self.base_url,
            )
            return overflow or self._refused(status, data)

        lines = self.http.stream("/api/chat", body, refuse=refused, lines=True)
        async with contextlib.aclosing(lines):
            async for _, line in lines:
                data = _json_line(line, self.base_url)
                if "error" in data:  # a failure after the reply began
                    raise refused(500, data)
                message = data.get("message") or {}
                piece, thought = message.get("content") or "", message.get("thinking") or ""
                text.append(piece)
                thinking.append(thought)
                calls.extend(message.get("tool_calls") or [])  # each arrives whole
                if data.get("done"):
                    final = data
                if piece or thought:
                    yield ChatDelta(piece, thought)
        message = {
            "role": "assistant",
            "content": "".join(text),
            "thinking": "".join(thinking) or None,
            "tool_calls": calls,
        }
        wall_ms = (time.perf_counter() - started) * 1000
        yield ChatDelta(
            result=self._final(final, message, counted, counter, num_ctx, messages, wall_ms)
        )

    async def _check_fits(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None,
        max_tokens: int,
        num_ctx: int,
        counter: TokenCounter,
    ) -> int:
        """The prompt's count; `ContextOverflow` (nothing sent) when it cannot fit."""
        counted = await self.count_prompt(messages, tools)
        if counted + max_tokens > num_ctx:
            raise ContextOverflow(
                f"the prompt for {self.model} on {_SERVER} at {self.base_url} has {counted} tokens "
                f"({counter.kind}) and {max_tokens} are reserved for output, but num_ctx is "
                f"{num_ctx}; Ollama would truncate it silently, so nothing was sent. Refit the "
                f"prompt to n_ctx={num_ctx}.",
                n_prompt_tokens=counted,
                n_ctx=num_ctx,
            )
        return counted

    def _chat_fields(
        self, json_schema: dict[str, Any] | None, tools: Sequence[dict[str, Any]] | None
    ) -> dict[str, Any]:
        """The request's fields beside model, messages and options."""
        fields: dict[str, Any] = {}
        if json_schema is not None:
            fields["format"] = json_schema
        if tools:
            fields["tools"] = list(tools)
        if self.think is not None:
            fields["think"] = self.think
        if self.keep_alive is not None:
            fields["keep_alive"] = self.keep_alive
        return fields

    def _final(
        self,
        final: dict[str, Any] | None,
        message: dict[str, Any],
        counted: int,
        counter: TokenCounter,
        num_ctx: int,
        messages: Sequence[ChatMessage],
        wall_ms: float,
    ) -> ChatResult:
        """The streamed answer (`message`) under the final chunk's counts, checked."""
        if final is None:
            raise InvalidResponse(
                f"{_SERVER} at {self.base_url} ended the stream for {self.model} without its "
                "final message (done: true); the answer may be cut"
            )
        final["message"] = message
        content = (
            sum(counter.count_many(m.get("content") or "" for m in messages))
            if counter.exact
            else None
        )
        return self._result(final, counted, content, counter, num_ctx, messages, wall_ms)

    def _result(
        self,
        response: Any,
        counted: int,
        content_tokens: int | None,
        counter: TokenCounter,
        num_ctx: int,
        messages: Sequence[ChatMessage],
        wall_ms: float,
    ) -> ChatResult:
        try:
            data = response.model_dump() if hasattr(response, "model_dump") else dict(response)
            message = data["message"] or {}
            text = message.get("content") or ""
            calls = [
                ToolCall(
                    id=call.get("id") or f"call_{i}",
                    name=call["function"]["name"],
                    arguments=dict(call["function"].get("arguments") or {}),
                )
                for i, call in enumerate(message.get("tool_calls") or [])
            ]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidResponse(
                f"{_SERVER} at {self.base_url} sent a chat response collective cannot read for "
                f"{self.model}: {exc}"
            ) from exc
        usage, timings = usage_from_response(data)
        timings["wall_ms"] = wall_ms
        warnings: list[str] = []
        reported = data.get("prompt_eval_count")
        if reported is None:
            warnings.append(
                f"{_SERVER} reported no prompt_eval_count for {self.model} (a fully cached "
                "prompt?); truncation could not be checked"
            )
        warning = truncation_warning(
            counted=counted,
            counter=counter,
            template_exact=False,  # Ollama renders its own Go template; no count here does
            prompt_eval_count=reported,
            num_ctx=num_ctx,
            n_messages=len(messages),
            model=self.model,
            content_tokens=content_tokens,
        )
        if warning:
            log.warning("%s", warning)
            warnings.append(warning)
        return ChatResult(
            text=text,
            usage=usage,
            model=str(data.get("model") or self.model),
            finish_reason=data.get("done_reason"),
            tool_calls=calls,
            timings=timings,
            warnings=warnings,
            reasoning=message.get("thinking") or None,
            confidence_note=NO_CONFIDENCE,
        )

    async def model_check(self) -> Health:
        """`/api/tags` lists the model (tags `:latest` or not)."""
        try:
            names = await self.list_models()
        except BackendError as exc:
            return Health(False, f"/api/tags failed: {exc}")

        def plain(name: str) -> str:
            return name.removesuffix(":latest")

        if plain(self.model) in {plain(str(n)) for n in names}:
            return Health(True, f"/api/tags lists {self.model}")
        listed = ", ".join(str(n) for n in names) or "none"
        return Health(
            False,
            f"/api/tags does not list {self.model} (it has: {listed}); create it with "
            f"`ollama create {self.model} -f ops/ollama/Modelfile...` or `ollama pull`",
        )

    async def health(self) -> Health:
        """Reachable and the model exists (`/api/show`); never raises."""
        try:
            await self.discover(refresh=True)
        except BackendError as exc:
            return Health(False, str(exc))
        return Health(True, f"{_SERVER} at {self.base_url} serves {self.model}")

    async def aclose(self) -> None:
        """Close this loop's pooled connections."""
        await self.http.aclose()


def _models(listing: Any) -> list[dict[str, Any]]:
    """The model entries of an `/api/tags` or `/api/ps` answer."""
    models = listing.get("models") if isinstance(listing, dict) else None
    return [m for m in models or [] if isinstance(m, dict)]


def _json_line(line: str, url: str) -> dict[str, Any]:
    """One line of `/api/chat`'s stream, or `InvalidResponse` saying what came instead."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidResponse(
            f"{_SERVER} at {url} streamed a line that is not JSON: {exc}"
        ) from exc
    if not isinstance(data, dict):
        raise InvalidResponse(f"{_SERVER} at {url} streamed {line[:200]!r}")
    return data


def ollama_host_url(host: str) -> str:
    """The URL `$OLLAMA_HOST` names, read as Ollama reads it.

    Empty: `DEFAULT_OLLAMA_URL`. Without a scheme, http and port 11434 unless given
    (`127.0.0.1` -> `http://127.0.0.1:11434`); with one, the scheme's own default port.
    """
    host = host.strip()
    if not host:
        return DEFAULT_OLLAMA_URL
    if "://" in host:
        return host
    url = f"http://{host}"
    try:
        port = urlsplit(url).port
    except ValueError:
        return url  # not a host[:port]: `checked_url` refuses it with the valid forms
    return url if port is not None else f"{url.rstrip('/')}:11434"


def _parse(spec: str, rest: str) -> BackendSpec:
    model, at, url = rest.rpartition("@")
    if not at:
        model, url = rest, ollama_host_url(environment.ollama_host())
    if not model:
        raise refuse(spec, "no model name before `@`")
    return BackendSpec("ollama", url=checked_url(spec, url), model=model)


register(
    BackendKind(
        "ollama",
        "ollama:MODEL@http://HOST:PORT",
        _parse,
        lambda spec: OllamaBackend(spec.model, spec.url),
    )
)
