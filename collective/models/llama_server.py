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
* A router (`llama-server --models-dir DIR` or `--models-preset FILE`, no `-m`) serves several
  models, each in an instance of its own: the spec names one (`llama-server:URL?model=NAME`),
  every POST carries it as `model` and every GET as `?model=`, so each role reads its own
  model's window, slots and tokenizer. `/models` lists what the router serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from collective.budget.counting import ChatMessage
from collective.errors import BackendError, ConfigError, InvalidResponse
from collective.models.admission import KV_POOL_MODES, POOL_TTL_S, ServerPool
from collective.models.base import Health
from collective.models.openai_compat import (
    OpenAICompatBackend,
    PromptMemo,
    ServerCounter,
    chat_body,
    http_error,
)
from collective.models.registry import BackendKind, BackendSpec, checked_url, register
from collective.models.special_tokens import escape_specials

__all__ = [
    "CountRoute",
    "LlamaServerBackend",
    "LlamaServerCounter",
    "PromptMemo",
    "llama_server_pool",
]

log = logging.getLogger(__name__)

_SERVER = "llama-server"


def _how_to_start(base_url: str) -> str:
    port = urlsplit(base_url).port or 8080
    return (
        f"Start it with `ops/llama-server/launch.sh --port {port}` (the embedded gemma model) "
        f"or `llama-server -m MODEL.gguf --host 127.0.0.1 --port {port}`."
    )


INPUT_TOKENS_PATH = "/v1/chat/completions/input_tokens"


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


class LlamaServerCounter(ServerCounter):
    """Exact counts from the server's own tokenizer (`kind` `exact:llama-server`)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        memo: PromptMemo | None = None,
        route: CountRoute | None = None,
        routed: str | None = None,
    ) -> None:
        self.routed = routed
        super().__init__(
            "exact:llama-server",
            base_url,
            server=_SERVER,
            how_to_start=_how_to_start(base_url),
            timeout=timeout,
            memo=memo,
        )
        self.route = route or CountRoute()

    def _post_raw(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        # A router sends each request to the instance of the model it names.
        return super()._post_raw(path, _routed_body(body, self.routed))

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

    def _count_chat(self, body: dict[str, Any]) -> int:
        """The input-tokens endpoint where built in, else `/apply-template` + `/tokenize`."""
        if self.route.input_tokens is not False:
            status, data = self._post_raw(INPUT_TOKENS_PATH, body)
            if status == 200:
                return _input_tokens(data, self.base_url)
            if not self.route.unsupported(status):
                raise http_error(status, data, self.base_url)
        prompt = _template_prompt(self._post("/apply-template", body), self.base_url)
        data = self._post("/tokenize", {"content": prompt, "add_special": True})
        return len(_int_list(data, "tokens", self.base_url))


def _routed_body(body: dict[str, Any], model: str | None) -> dict[str, Any]:
    """`body` naming `model` for a router (unchanged for a server of one model)."""
    return body if model is None else {**body, "model": model}


def _routed_path(path: str, model: str | None) -> str:
    """`path` with `?model=` for a router (unchanged for a server of one model)."""
    if model is None:
        return path
    return f"{path}{'&' if '?' in path else '?'}{urlencode({'model': model})}"


def router_models(data: Any) -> list[tuple[str, str]]:
    """(id, status) of each model a router's `/models` lists (aliases are not listed)."""
    listed = data.get("data") if isinstance(data, dict) else None
    out = []
    for entry in listed if isinstance(listed, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            status = entry.get("status")
            value = status.get("value") if isinstance(status, dict) else None
            out.append((entry["id"], value if isinstance(value, str) else "?"))
    return out


def _int_list(data: Any, key: str, url: str) -> list[int]:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, list) or not all(isinstance(t, int) for t in value):
        raise InvalidResponse(f"{_SERVER} at {url}: expected a list of token ids in {key!r}")
    return value


def llama_server_pool(
    props: Mapping[str, Any],
    slots: list[Any] | None,
    *,
    server: str,
    kv: str = "auto",
) -> ServerPool:
    """The pool of a llama-server from its `/props` (and `/slots` where enabled).

    Args:
        props: The `/props` body: `total_slots` and the per-slot
            `default_generation_settings.n_ctx`.
        slots: The `/slots` body (one entry per slot with its `n_ctx`), or None where the
            server disables it.
        server: The server's URL.
        kv: One of `KV_POOL_MODES`.

    Raises:
        ValueError: `props` reports no usable per-slot `n_ctx`.
    """
    settings = props.get("default_generation_settings") or {}
    slot_ctx = settings.get("n_ctx", props.get("n_ctx"))
    if not isinstance(slot_ctx, int) or slot_ctx <= 0:
        raise ValueError("/props reports no per-slot n_ctx")
    n_slots = props.get("total_slots")
    source = "/props"
    if slots:
        listed = [s.get("n_ctx") for s in slots if isinstance(s, dict)]
        ctxs = [c for c in listed if isinstance(c, int) and c > 0]
        if ctxs:
            n_slots, slot_ctx, source = len(ctxs), min(ctxs), "/props+/slots"
    n_slots = n_slots if isinstance(n_slots, int) and n_slots > 0 else 1
    if n_slots == 1:
        return ServerPool(server, 1, slot_ctx, slot_ctx, False, source)
    if kv == "per-slot":
        return ServerPool(server, n_slots, slot_ctx, n_slots * slot_ctx, False, source + ", ?kv")
    why = ", ?kv" if kv == "unified" else ", several slots read as one unified pool"
    return ServerPool(server, n_slots, slot_ctx, slot_ctx, True, source + why)


FAN_OUT_WAIT_S = 5.0
"""The longest `before_fan_out` waits for the server."""


class LlamaServerBackend(OpenAICompatBackend):
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
        model: The model a router serves this backend from; default from the URL's `?model=`
            (`llama-server:http://HOST:PORT?model=NAME`), else none (a server of one model).

    `/props` (and `/slots`) are re-read at most every `POOL_TTL_S` seconds and at once after
    a failed request, so a restarted server is planned for as it is now.
    """

    supports_tools = True  # refined from /props `chat_template_caps` at discovery
    supports_json_schema = True  # response_format json_schema becomes a grammar
    context_fix = (
        "Give each llama-server slot the preset's context: -c $((32768*K)) -np K "
        "(ops/llama-server/launch.sh)."
    )

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
        model: str | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        query = parse_qs(parts.query)
        kv = kv_pool or (query.get("kv") or ["auto"])[-1]
        if kv not in KV_POOL_MODES:
            raise ValueError(f"kv={kv!r}: use one of {', '.join(KV_POOL_MODES)}")
        self.kv_pool = kv
        self.routed = model or (query.get("model") or [""])[-1] or None
        """The model a router serves this backend from (None: a server of one model)."""
        super().__init__(
            parts._replace(query="", fragment="").geturl(),
            server=_SERVER,
            timeout=timeout,
            connect_timeout=connect_timeout,
            load_wait=load_wait,
            precheck=precheck,
        )
        self.spec = f"llama-server:{_routed_path(self.base_url, self.routed)}"
        self.model = self.routed or _SERVER
        self._n_ctx: int | None = None
        self._pool: ServerPool | None = None
        self._read_at = 0.0
        self._seen: tuple[Any, ...] | None = None
        self._counter: LlamaServerCounter | None = None
        self.prompt_memo = PromptMemo()
        """Exact prompt counts shared with `token_counter()` (see `PromptMemo`)."""
        self.count_route = CountRoute(count_mode)

    @classmethod
    def from_spec(cls, spec: BackendSpec) -> LlamaServerBackend:
        """The backend a `llama-server:URL` spec names."""
        return cls(spec.url)

    def _how_to_start(self) -> str:
        return _how_to_start(self.base_url)

    def _forget(self) -> None:
        self._n_ctx = None
        self.prompt_memo.clear()

    def _extra_body(self) -> dict[str, Any]:
        # Reuse the slot's KV cache for a shared prefix; a router routes by `model`.
        return _routed_body({"cache_prompt": True}, self.routed)

    async def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, Any]:
        return await super()._request(method, *self._routed(method, path, body))

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return await super()._call(method, *self._routed(method, path, body))

    def _routed(
        self, method: str, path: str, body: dict[str, Any] | None
    ) -> tuple[str, dict[str, Any] | None]:
        """A request's path and body naming the routed model (a router's own paths aside)."""
        if self.routed is None or path in ("/health", "/models"):
            return path, body
        if method == "GET":
            return _routed_path(path, self.routed), body
        return path, _routed_body(body or {}, self.routed)

    async def before_fan_out(self) -> None:
        """Give every idle slot the planner's prompt, so each member starts from it.

        Concurrent slots do not share a cache (llama.cpp issue 22942), so a member on another
        slot than the planner's would read the shared prefix again. Where the server saves
        slots (`--slot-save-path`), the planner's slot (the idle one that ran the latest task)
        is saved to a file and restored into every other idle slot: a member then finds the
        prefix on whichever slot it takes, and the K members compute about one prompt. Only for
        independent slots (`?kv=per-slot`): in a unified pool each restored copy would take
        cells that admission does not know of.

        Otherwise the host prompt cache (`--cache-ram`, on by default) is used: the server saves
        its idle slots there when a task starts, and a member placed on another slot loads the
        cached prompt that shares the most with its own. A one-token request, sent as an id
        with no BOS so that it shares no prefix with the planner's prompt, starts on another
        slot and gets the planner's saved. A cached prompt moves into the slot that loads it, so
        one more member reuses the prefix than without this (measured: 2 of 3 members instead of
        1; bench/README.md). Not sent to a single slot: it would take the planner's slot itself,
        whose prompt is lost where the host cache is off.
        """
        # Bounded: on a server whose slots are all busy the request would wait for one.
        with contextlib.suppress(BackendError, TimeoutError):
            async with asyncio.timeout(FAN_OUT_WAIT_S):
                pool = await self.pool()
                if pool.slots < 2:
                    return
                if not pool.unified and await self._restore_planner_slot():
                    return
                _, data = await self._request(
                    "POST", "/tokenize", {"content": "\n", "add_special": False}
                )
                token = _int_list(data, "tokens", self.base_url)[-1:]
                await self._request("POST", "/completion", {"prompt": token, "n_predict": 1})

    async def _restore_planner_slot(self) -> bool:
        """Copy the latest task's idle slot into the other idle slots; False where not done."""
        status, slots = await self._request("GET", "/slots")
        if status != 200 or not isinstance(slots, list):
            return False
        idle = [s for s in slots if isinstance(s, dict) and not s.get("is_processing")]
        used = [s for s in idle if s.get("n_prompt_tokens") and isinstance(s.get("id_task"), int)]
        if not used or len(idle) < 2:
            return False
        source = max(used, key=lambda s: s["id_task"])
        # One file per slot on the server's disk, overwritten by the next council.
        file = {"filename": f"collective-slot-{source['id']}.bin"}
        status, _ = await self._request("POST", f"/slots/{source['id']}?action=save", file)
        if status != 200:
            return False  # no --slot-save-path: the host cache is the way
        restored = [
            await self._request("POST", f"/slots/{s['id']}?action=restore", file)
            for s in idle
            if s is not source
        ]
        return all(status == 200 for status, _ in restored)

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
            if data.get("role") == "router" and self.routed is None:
                raise await self._router_unnamed()
            try:
                pool = llama_server_pool(data, slots, server=self.pool_key, kv=self.kv_pool)
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
            if isinstance(name, str) and name and self.routed is None:
                self.model = PurePosixPath(name).name.removesuffix(".gguf")
            self._n_ctx = n_ctx
        return self._n_ctx

    async def most_samples(self) -> int:
        """`n_cmpl` asks for at most as many completions as the server has slots."""
        return (await self.pool()).slots

    async def pool(self) -> ServerPool:
        """The server's slots and KV pool, from `/props` and `/slots` (see `context_window`)."""
        await self.context_window()
        assert self._pool is not None
        return self._pool

    @property
    def pool_key(self) -> str:
        """The server's KV pool as admission knows it: each model of a router has its own."""
        return _routed_path(self.base_url, self.routed)

    async def models(self) -> list[tuple[str, str]]:
        """(id, status) of the models a router serves (`/models`); [] for a server of one."""
        status, data = await self._request("GET", "/models")
        return router_models(data) if status == 200 else []

    async def _router_unnamed(self) -> ConfigError:
        listed = ", ".join(name for name, _ in await self.models()) or "none listed"
        return ConfigError(
            f"{_SERVER} at {self.base_url} is a router serving several models ({listed}): name "
            f"one in the spec, llama-server:{self.base_url}?model=NAME"
        )

    async def model_check(self) -> Health:
        """`/props` names the model the server loaded; a router's `/models` lists it."""
        try:
            if self.routed is not None:
                return await self._router_check()
            props = await self.props()
            if props.get("role") == "router":
                return Health(False, str(await self._router_unnamed()))
        except BackendError as exc:
            return Health(False, str(exc))
        path = props.get("model_path") or props.get("model_alias")
        if not path:
            return Health(False, "/props names no model")
        return Health(True, f"/props: {path}")

    async def _router_check(self) -> Health:
        """The router lists the model; its instance answers `/props` (loading it if need be)."""
        listed = await self.models()
        names = ", ".join(f"{name} ({status})" for name, status in listed) or "none"
        if self.routed not in {name for name, _ in listed}:
            # An alias resolves on the router too; `/props` says whether it does.
            status, data = await self._request("GET", "/props")
            if status != 200:
                return Health(
                    False,
                    f"router at {self.base_url} does not serve {self.routed!r}; /models lists "
                    f"{names}",
                )
        props = await self.props()
        path = props.get("model_path") or props.get("model_alias")
        return Health(True, f"/models: {names}; {self.routed} /props: {path}")

    async def token_counter(self) -> LlamaServerCounter:
        """The server's own tokenizer (`exact:llama-server`)."""
        if self._counter is None:
            self._counter = LlamaServerCounter(
                self.base_url, memo=self.prompt_memo, route=self.count_route, routed=self.routed
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
        body = chat_body(messages, tools)
        key = PromptMemo.key(body)
        n = self.prompt_memo.get(key)
        if n is not None:
            return n
        if self.count_route.input_tokens is not False:
            routed = _routed_body(body, self.routed)
            status, data = await self.http.request("POST", INPUT_TOKENS_PATH, routed, wait=True)
            if status == 200:
                n = _input_tokens(data, self.base_url)
            elif not self.count_route.unsupported(status):
                raise http_error(status, data, self.base_url)
        if n is None:
            rendered = await self._call("POST", "/apply-template", body)
            prompt = _template_prompt(rendered, self.base_url)
            data = await self._call("POST", "/tokenize", {"content": prompt, "add_special": True})
            n = len(_int_list(data, "tokens", self.base_url))
        self.prompt_memo.put(key, n)
        return n

    async def aclose(self) -> None:
        """Close pooled connections (the async ones of this loop and the counter's)."""
        await super().aclose()
        if self._counter is not None:
            self._counter.close()
            self._counter = None


register(
    BackendKind(
        "llama-server",
        "llama-server:http://HOST:PORT",
        lambda spec, rest: BackendSpec("llama-server", url=checked_url(spec, rest)),
        LlamaServerBackend.from_spec,
    )
)
