"""`openai:MODEL@URL`: any server with OpenAI's `/v1/chat/completions`.

vLLM, SGLang, LM Studio, llama-server and TGI, held to the same guarantee as the other backends:

* The window: vLLM and SGLang put `max_model_len` in `/v1/models`; a llama-server says its
  per-slot `n_ctx` in `/props`; else the spec's `?n_ctx=N`. A spec's `n_ctx` below what the
  server reports wins (a smaller plan on purpose). A server that reports nothing and a spec
  without `n_ctx` are refused at preflight (`model_check`) and at the first call, saying what
  to set.
* Counts: exact where the server tokenizes a whole chat. vLLM's `POST /tokenize` takes
  `messages`, `tools` and `add_generation_prompt` and returns `count` (kind `exact:tokenize`);
  a llama-server is counted as `LlamaServerBackend` counts (`exact:llama-server`). Elsewhere the
  spec's declared tokenizer (`?tokenizer=cl100k_base|o200k_base|o200k_harmony|gguf:/path.gguf`)
  with a safety margin (`?margin=0.1`), else the calibrated character estimate: both are
  labelled `estimated:...`/`estimate:...` in every budget report, never silently exact.
* A prompt the server refuses for its length (vLLM's HTTP 400 "This model's maximum context
  length is N tokens ...", llama-server's `exceed_context_size_error`) becomes
  `ContextOverflow` (`collective.models.openai_compat.http_error`), refitted once.
* The pool: a llama-server's slots (`/props`, `/slots`); other servers batch continuously and
  queue what they cannot run, so none is reported and calls are sent at once.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from collective import environment
from collective.budget.counting import (
    ChatMessage,
    EstimateCounter,
    TokenCounter,
    tiktoken_counter,
)
from collective.errors import BackendError, ConfigError, InvalidResponse
from collective.models.admission import POOL_TTL_S, ServerPool
from collective.models.base import ChatResult, Health
from collective.models.llama_server import LlamaServerBackend
from collective.models.openai_compat import OpenAICompatBackend, ServerCounter
from collective.models.registry import BackendKind, BackendSpec, checked_url, refuse, register
from collective.models.special_tokens import escape_specials

__all__ = ["MarginCounter", "OpenAIBackend", "TokenizeCounter", "declared_counter"]

log = logging.getLogger(__name__)

_SERVER = "OpenAI-compatible server"

TOKENIZERS = ("cl100k_base", "o200k_base", "o200k_harmony", "gguf:/path/model.gguf")
"""The tokenizers a spec may declare (`?tokenizer=`)."""

DEFAULT_MARGIN = 0.1
"""How much a declared tokenizer's counts are inflated: its vocabulary may be the model's, but
the server's chat template is not applied here."""


class MarginCounter(TokenCounter):
    """Another counter's counts inflated by a safety margin (`estimated:<kind>+N%`).

    For a tokenizer that is not certainly the server's: cuts stay on the inner counter's
    boundaries, at the margin-reduced size.
    """

    def __init__(self, inner: TokenCounter, margin: float = DEFAULT_MARGIN) -> None:
        super().__init__()
        if margin < 0:
            raise ValueError("margin must be >= 0")
        self.inner = inner
        self.margin = margin
        self.kind = f"estimated:{inner.kind.removeprefix('exact:')}+{margin:.0%}"

    def _count(self, text: str) -> int:
        return math.ceil(self.inner.count(text) * (1 + self.margin))

    def _inner_budget(self, max_tokens: int) -> int:
        return max(0, math.floor(max_tokens / (1 + self.margin)))

    def head(self, text: str, max_tokens: int) -> str:
        """The longest prefix counted at most `max_tokens` (margin included)."""
        return self.inner.head(text, self._inner_budget(max_tokens))

    def tail(self, text: str, max_tokens: int) -> str:
        """The longest suffix counted at most `max_tokens` (margin included)."""
        return self.inner.tail(text, self._inner_budget(max_tokens))


def declared_counter(name: str, margin: float = DEFAULT_MARGIN) -> MarginCounter:
    """The counter a spec's `?tokenizer=` names, with its safety margin.

    Raises:
        ConfigError: An unknown tokenizer, or a GGUF that cannot be read.
    """
    if name.startswith("gguf:"):
        from collective.models.llamacpp_in_process import gguf_vocab_counter

        return MarginCounter(gguf_vocab_counter(name.removeprefix("gguf:")), margin)
    if name in TOKENIZERS:
        return MarginCounter(tiktoken_counter(name), margin)
    raise ConfigError(f"tokenizer={name!r}: use one of {', '.join(TOKENIZERS)}")


class TokenizeCounter(ServerCounter):
    """Exact counts from vLLM's `/tokenize` and `/detokenize` (`exact:tokenize`).

    A whole chat is counted as the server renders it (`messages`, `tools`,
    `add_generation_prompt`), which equals its `usage.prompt_tokens`.
    """

    def __init__(self, base_url: str, model: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(
            "exact:tokenize", base_url, server=_SERVER, how_to_start=_HOW_TO_START, headers=headers
        )
        self.model = model

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        data = super()._post(path, {"model": self.model, **body})
        if not isinstance(data, dict):
            raise InvalidResponse(f"{_SERVER} at {self.base_url}: {path} gave {data!r}")
        return data

    def _encode(self, text: str) -> list[int]:
        # As the chat path sees content: escaped (special_tokens.py).
        body = {"prompt": escape_specials(text), "add_special_tokens": False}
        tokens = self._post("/tokenize", body).get("tokens")
        if not isinstance(tokens, list):
            raise InvalidResponse(f"{_SERVER} at {self.base_url}: /tokenize gave no tokens")
        return tokens

    def _decode(self, ids: Sequence[int]) -> str:
        text = self._post("/detokenize", {"tokens": list(ids)}).get("prompt")
        if not isinstance(text, str):
            raise InvalidResponse(f"{_SERVER} at {self.base_url}: /detokenize gave no prompt")
        return text

    def _count_chat(self, body: dict[str, Any]) -> int:
        n = self._post("/tokenize", body | {"add_generation_prompt": True}).get("count")
        if not isinstance(n, int):
            raise InvalidResponse(f"{_SERVER} at {self.base_url}: /tokenize gave no count")
        return n


_HOW_TO_START = (
    "Start the server (e.g. `vllm serve MODEL --port PORT`, `python -m sglang.launch_server`, "
    "LM Studio's server, or `llama-server -m MODEL.gguf --port PORT`) and check the URL."
)


class OpenAIBackend(OpenAICompatBackend):
    """`model` on the OpenAI-compatible server at `base_url` (see the module docstring).

    Args:
        model: The model name the server serves (`/v1/models` ids).
        base_url: e.g. `http://127.0.0.1:8000` (no `/v1`).
        n_ctx: The window to plan for when the server reports none (or a smaller one).
        tokenizer: A declared tokenizer for servers that cannot count a chat (`TOKENIZERS`).
        margin: The declared tokenizer's safety margin.
        **options: As `OpenAICompatBackend` (timeouts, `precheck`).
    """

    context_fix = (
        " Start the server with a larger window (vLLM --max-model-len, SGLang "
        "--context-length, llama-server -c/-np, LM Studio's context length) or choose a "
        "smaller preset."
    )

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        n_ctx: int | None = None,
        tokenizer: str | None = None,
        margin: float = DEFAULT_MARGIN,
        **options: Any,
    ) -> None:
        key = environment.openai_api_key()  # vLLM/SGLang started with --api-key want it
        headers = {"Authorization": f"Bearer {key}"} if key else None
        super().__init__(
            base_url, server=_SERVER, health_path="/v1/models", headers=headers, **options
        )
        self.model = model
        self.spec = f"openai:{model}@{self.base_url}"
        self.n_ctx = n_ctx
        self.tokenizer = tokenizer
        self.margin = margin
        self._listed: dict[str, Any] | None = None
        self._read_at = 0.0
        self._llama: LlamaServerBackend | None = None
        self._probed = False
        self._counter: TokenCounter | None = None

    @classmethod
    def from_spec(cls, spec: BackendSpec) -> OpenAIBackend:
        """The backend an `openai:MODEL@URL[?n_ctx=N&tokenizer=T&margin=M]` spec names."""
        parts = urlsplit(spec.url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        base = parts._replace(query="", fragment="").geturl()
        n_ctx = int(query["n_ctx"]) if "n_ctx" in query else None
        margin = float(query.get("margin", DEFAULT_MARGIN))
        return cls(spec.model, base, n_ctx=n_ctx, tokenizer=query.get("tokenizer"), margin=margin)

    def _how_to_start(self) -> str:
        return _HOW_TO_START

    def _forget(self) -> None:
        self._listed = None
        if self._llama is not None:
            self._llama._forget()

    def _extra_body(self) -> dict[str, Any]:
        return {"model": self.model}

    # -- discovery --------------------------------------------------------------------------

    async def _model_entry(self) -> dict[str, Any] | None:
        """This model's `/v1/models` entry (None: not listed), read at most every `POOL_TTL_S`."""
        if self._listed is None or time.monotonic() - self._read_at > POOL_TTL_S:
            data = await self._call("GET", "/v1/models")
            entries = data.get("data") if isinstance(data, dict) else None
            if not isinstance(entries, list):
                raise InvalidResponse(f"{_SERVER} at {self.base_url}: /v1/models lists nothing")
            self._listed = {str(e.get("id")): e for e in entries if isinstance(e, dict)}
            self._read_at = time.monotonic()
            if not self._probed:
                self._probed = True
                await self._probe_llama_server()
        return self._listed.get(self.model)

    async def _probe_llama_server(self) -> None:
        """Whether the server is a llama-server (its `/props`): then it counts and pools as one."""
        status, data = await self._request("GET", "/props")
        if status == 200 and isinstance(data, dict) and "default_generation_settings" in data:
            self._llama = LlamaServerBackend(self.base_url, timeout=self.http.timeout.read or 600.0)

    def _no_window(self) -> str:
        return (
            f"{_SERVER} at {self.base_url} reports no window for {self.model} (no "
            f"max_model_len in /v1/models); set it in the spec: "
            f"openai:{self.model}@{self.base_url}?n_ctx=N (the server's context length)"
        )

    async def context_window(self) -> int:
        """The server's window (`max_model_len`, a llama-server's slot), capped by `n_ctx`.

        Raises:
            ConfigError: Neither the server nor the spec gives a window.
        """
        entry = await self._model_entry()
        reported = entry.get("max_model_len") if entry else None
        if self._llama is not None:
            reported = await self._llama.context_window()
            self.supports_tools = self._llama.supports_tools  # what its template renders
        windows = [n for n in (reported, self.n_ctx) if isinstance(n, int) and n > 0]
        if not windows:
            raise ConfigError(self._no_window())
        return min(windows)

    async def pool(self) -> ServerPool | None:
        """A llama-server's slots and pool; None for servers that queue what they cannot run."""
        await self._model_entry()
        return await self._llama.pool() if self._llama is not None else None

    async def model_check(self) -> Health:
        """`/v1/models` lists the model, and a window is known."""
        try:
            entry = await self._model_entry()
            if entry is None and self._llama is None:
                listed = ", ".join(self._listed or {}) or "none"
                return Health(False, f"/v1/models does not list {self.model} (it has: {listed})")
            n_ctx = await self.context_window()
        except (BackendError, ConfigError) as exc:
            return Health(False, str(exc))
        return Health(True, f"/v1/models: {self.model}, window {n_ctx:,}")

    async def token_counter(self) -> TokenCounter:
        """The server's own count where it has one, else the declared tokenizer or an estimate."""
        if self._counter is None:
            await self._model_entry()
            if self._llama is not None:
                self._counter = await self._llama.token_counter()
            elif await self._tokenizes_chats():
                self._counter = TokenizeCounter(self.base_url, self.model, headers=self.headers)
            elif self.tokenizer:
                self._counter = declared_counter(self.tokenizer, self.margin)
            else:
                self._counter = EstimateCounter()
        return self._counter

    async def _tokenizes_chats(self) -> bool:
        """Whether `POST /tokenize` counts a chat (vLLM's form, with `count`)."""
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "hi"}],
            "add_generation_prompt": True,
        }
        try:
            status, data = await self._request("POST", "/tokenize", body)
        except BackendError:
            return False
        return status == 200 and isinstance(data, dict) and isinstance(data.get("count"), int)

    def _undercounted(self, result: ChatResult, counted: int) -> None:
        """A loud warning when an estimate fell short of the server's own count."""
        if self._counter is None or self._counter.exact:
            return
        warning = (
            f"COUNT UNDER ESTIMATE on {self.spec}: the server counted "
            f"{result.usage.prompt_tokens} prompt tokens where collective estimated {counted} "
            f"({self._counter.kind}); declare the model's own tokenizer "
            "(?tokenizer=gguf:/path/model.gguf) or raise ?margin="
        )
        log.warning("%s", warning)
        result.warnings.append(warning)

    async def count_prompt(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> int:
        """Prompt tokens as the server will see them (by `token_counter`)."""
        if self._llama is not None:
            return await self._llama.count_prompt(messages, tools)
        return await super().count_prompt(messages, tools)

    async def aclose(self) -> None:
        """Close pooled connections."""
        await super().aclose()
        if self._llama is not None:
            await self._llama.aclose()
        close = getattr(self._counter, "close", None)
        if close is not None and self._llama is None:
            close()
        self._counter = None


def _parse(spec: str, rest: str) -> BackendSpec:
    model, at, url = rest.rpartition("@")
    if not at or not model:
        raise refuse(spec, "expected openai:MODEL@http://HOST:PORT")
    url = checked_url(spec, url)
    query = parse_qs(urlsplit(url).query)
    unknown = set(query) - {"n_ctx", "tokenizer", "margin"}
    if unknown:
        raise refuse(spec, f"unknown option {sorted(unknown)[0]!r} (n_ctx, tokenizer, margin)")
    try:
        if "n_ctx" in query and int(query["n_ctx"][-1]) <= 0:
            raise ValueError("n_ctx must be > 0")
        if "margin" in query and not 0 <= float(query["margin"][-1]) < 1:
            raise ValueError("margin must be in [0, 1)")
    except ValueError as exc:
        raise refuse(spec, str(exc)) from None
    tokenizer = (query.get("tokenizer") or [""])[-1]
    if tokenizer and tokenizer not in TOKENIZERS[:3] and not tokenizer.startswith("gguf:"):
        raise refuse(spec, f"tokenizer {tokenizer!r}: use one of {', '.join(TOKENIZERS)}")
    return BackendSpec("openai", url=url, model=model)


register(
    BackendKind(
        "openai",
        "openai:MODEL@http://HOST:PORT[?n_ctx=N&tokenizer=cl100k_base]",
        _parse,
        OpenAIBackend.from_spec,
    )
)
