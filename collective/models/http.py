"""The one place collective talks HTTP (`HttpServer`); no other module opens a connection.

Every backend, token counter and embedder calls its server through an `HttpServer`:

* A transport failure becomes a `collective.errors` type once, here
  (`translate_transport_error`), naming the URL and saying what to do.
* A pooled keep-alive connection that the server closed as the request went out ("without
  sending a response": nothing was processed) is retried once, on a fresh connection.
* A 503 (the model is loading, or every slot is busy) is waited out once, polling the health
  path for at most `load_wait` seconds.
* A streamed reply is read as server-sent events by `httpx-sse` (an event whose data spans
  several `data:` lines included) or as JSON lines (Ollama).
* Synchronous callers (token counters, embedders, from worker threads) run the same
  coroutines on one I/O thread (`HttpServer.blocking`).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, TypeVar

import httpx
from httpx_sse import EventSource, SSEError

from collective.errors import BackendError, BackendTimeout, BackendUnavailable, InvalidResponse

__all__ = ["LIMITS", "HttpServer", "LoopLocal", "parse_json", "translate_transport_error"]

T = TypeVar("T")

LIMITS = httpx.Limits(max_keepalive_connections=16, keepalive_expiry=2.0)
"""Pooled connections per server and loop; idle ones close before a server's own timeout."""


def translate_transport_error(
    exc: BaseException, *, server: str, url: str, how_to_start: str
) -> BackendError:
    """The collective error for an httpx (or socket) failure talking to `url`.

    Args:
        exc: The exception raised by the HTTP client.
        server: What runs at `url`, e.g. `llama-server`.
        url: The base URL that was called.
        how_to_start: A sentence telling the user how to start that server.
    """
    if isinstance(exc, httpx.TimeoutException | asyncio.TimeoutError | TimeoutError):
        kind = type(exc).__name__
        return BackendTimeout(
            f"{server} at {url} did not answer in time ({kind}). It may be overloaded or "
            "processing a long prompt; raise the backend timeout or lower the load."
        )
    if isinstance(exc, httpx.ConnectError | ConnectionRefusedError):
        return BackendUnavailable(
            f"cannot connect to {server} at {url} (connection refused: {exc}). Is it running? "
            f"{how_to_start}"
        )
    if isinstance(exc, httpx.TransportError | ConnectionError | OSError):
        return BackendUnavailable(
            f"the connection to {server} at {url} failed ({type(exc).__name__}: {exc}). The "
            f"server may have stopped or restarted. {how_to_start}"
        )
    return InvalidResponse(f"{server} at {url} failed unexpectedly: {type(exc).__name__}: {exc}")


def parse_json(response: httpx.Response, *, server: str, url: str) -> Any:
    """The JSON body of `response`, or `InvalidResponse` saying what came back instead."""
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        snippet = response.text[:200].replace("\n", " ")
        raise InvalidResponse(
            f"{server} at {url} answered {response.request.url.path} with HTTP "
            f"{response.status_code} and a body that is not JSON ({exc}): {snippet!r}. "
            "Check that the URL points at the right kind of server."
        ) from exc


class LoopLocal:
    """One async HTTP client per running event loop.

    An `httpx.AsyncClient`'s pooled connections belong to the loop that opened them, and a
    backend may be shared across loops (the registry caches backends per process; tests and
    the CLI each run their own loop), so each loop gets its own client.
    """

    def __init__(self, factory: Any) -> None:
        self._factory = factory
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, Any]] = {}

    def get(self) -> Any:
        """The client of the running loop, created on first use."""
        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is None or entry[0] is not loop:
            # Forget clients of loops that have closed; their connections died with them.
            self._clients = {k: v for k, v in self._clients.items() if not v[0].is_closed()}
            entry = self._clients[id(loop)] = (loop, self._factory())
        return entry[1]

    async def aclose(self) -> None:
        """Close the running loop's client and drop the others."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        clients, self._clients = self._clients, {}
        for owner, client in clients.values():
            if owner is loop:
                close = getattr(client, "aclose", None)
                if close is None:  # the ollama client wraps an httpx client
                    close = client._client.aclose
                await close()


def _stale(exc: httpx.RemoteProtocolError) -> bool:
    """The server closed a pooled connection as the request went out: nothing was processed."""
    return "without sending a response" in str(exc)


Refuse = Callable[[int, Any], BackendError]
"""A backend's error for a non-200 answer (status, JSON body)."""


class HttpServer:
    """One server's HTTP: JSON requests, streamed replies, readiness, for async and sync callers.

    Args:
        base_url: e.g. `http://127.0.0.1:8083` (no query).
        server: What runs there, in messages (`llama-server`, `Ollama`).
        how_to_start: A sentence telling the user how to start that server.
        timeout: Seconds one request may take (a chat: prompt processing plus generation).
        connect_timeout: Seconds to open a connection.
        load_wait: Longest wait (seconds) for a server that answers 503 while loading.
        health_path: What answers 200 once the model is loaded.
        headers: Sent with every request (e.g. `Authorization`).
        on_failure: Called on every transport failure (the caller forgets what it read from
            the server: whatever answers at this URL next may be another one).
    """

    def __init__(
        self,
        base_url: str,
        *,
        server: str,
        how_to_start: Callable[[], str],
        timeout: float = 600.0,
        connect_timeout: float = 5.0,
        load_wait: float = 120.0,
        health_path: str = "/health",
        headers: Mapping[str, str] | None = None,
        on_failure: Callable[[], None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.server = server
        self.how_to_start = how_to_start
        self.load_wait = load_wait
        self.health_path = health_path
        self.headers = dict(headers or {})
        self.on_failure = on_failure
        self.timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._clients = LoopLocal(
            lambda: httpx.AsyncClient(
                base_url=self.base_url, timeout=self.timeout, limits=LIMITS, headers=self.headers
            )
        )

    def failure(self, exc: BaseException) -> BackendError:
        """The collective error for a transport failure (after `on_failure`)."""
        if self.on_failure is not None:
            self.on_failure()
        return translate_transport_error(
            exc, server=self.server, url=self.base_url, how_to_start=self.how_to_start()
        )

    async def request(
        self, method: str, path: str, body: Any = None, *, wait: bool = False
    ) -> tuple[int, Any]:
        """One request: its status and JSON body (a stale pooled connection retried once).

        Args:
            method: `GET`, `POST`, ...
            path: Under `base_url`.
            body: Sent as JSON (None: no body).
            wait: Wait out a 503 once (see `wait_ready`) and send the request again.

        Raises:
            BackendUnavailable: The server cannot be reached.
            BackendTimeout: It did not answer in time.
            InvalidResponse: The body is not JSON.
        """
        status, data = await self._send(method, path, body)
        if wait and status == 503:
            await self.wait_ready()
            status, data = await self._send(method, path, body)
        return status, data

    async def _send(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        client: httpx.AsyncClient = self._clients.get()
        for attempt in (1, 2):
            try:
                response = await client.request(method, path, json=body)
                break
            except httpx.RemoteProtocolError as exc:
                if attempt == 2 or not _stale(exc):
                    raise self.failure(exc) from exc
            except httpx.HTTPError as exc:
                raise self.failure(exc) from exc
        return response.status_code, parse_json(response, server=self.server, url=self.base_url)

    async def call(self, method: str, path: str, body: Any = None, *, refuse: Refuse) -> Any:
        """The JSON body of a 200; a 503 is waited out once; any other status is `refuse`d."""
        status, data = await self.request(method, path, body, wait=True)
        if status != 200:
            raise refuse(status, data)
        return data

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until `health_path` answers 200 (the model is loaded).

        Raises:
            BackendUnavailable: Still loading after `timeout` (default `load_wait`) seconds, or
                refused.
        """
        deadline = time.monotonic() + (self.load_wait if timeout is None else timeout)
        while True:
            status, _ = await self._send("GET", self.health_path, None)
            if status == 200:
                return
            if time.monotonic() >= deadline:
                raise BackendUnavailable(
                    f"{self.server} at {self.base_url} was still loading its model after "
                    f"{self.load_wait:g}s (HTTP {status} on {self.health_path}). Wait for it to "
                    "finish loading, or check its log."
                )
            await asyncio.sleep(0.25)

    async def stream(
        self, path: str, body: Any, *, refuse: Refuse, lines: bool = False
    ) -> AsyncGenerator[tuple[str, str]]:
        """POST `body` and yield the reply as it arrives.

        Each server-sent event as `(event, data)`; with `lines`, each non-empty line of JSON
        lines as `("", line)`.
        A stale pooled connection is retried once while nothing has arrived; a 503 is waited
        out once; any other non-200 status is `refuse`d. Closing the iterator closes the
        connection (a server then stops generating).
        """
        client: httpx.AsyncClient = self._clients.get()
        arrived = False
        for attempt in (1, 2):
            try:
                async with client.stream("POST", path, json=body) as response:
                    if response.status_code == 200:
                        async for item in _items(response, lines):
                            arrived = True
                            yield item
                        return
                    await response.aread()
                    data = parse_json(response, server=self.server, url=self.base_url)
            except httpx.RemoteProtocolError as exc:
                if attempt == 2 or arrived or not _stale(exc):
                    raise self.failure(exc) from exc
                continue
            except SSEError as exc:  # an httpx.TransportError, but the server did answer
                raise InvalidResponse(
                    f"{self.server} at {self.base_url} answered {path} with something other "
                    f"than server-sent events ({exc})"
                ) from exc
            except httpx.HTTPError as exc:
                raise self.failure(exc) from exc
            if response.status_code != 503 or attempt == 2:
                raise refuse(response.status_code, data)
            await self.wait_ready()

    def blocking(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run one of these coroutines for a synchronous caller (a worker thread).

        It runs on the I/O thread's loop; never call this on that thread.
        """
        return asyncio.run_coroutine_threadsafe(coroutine, _io_loop()).result()

    async def aclose(self) -> None:
        """Close this loop's pooled connections."""
        await self._clients.aclose()

    def close(self) -> None:
        """Close the I/O thread's pooled connections (those `blocking` calls used)."""
        if _io is not None and _io[0] == os.getpid() and _io[1].is_running():
            self.blocking(self._clients.aclose())


async def _items(response: httpx.Response, lines: bool) -> AsyncIterator[tuple[str, str]]:
    if lines:
        async for line in response.aiter_lines():
            if line.strip():
                yield "", line
    else:
        async for event in EventSource(response).aiter_sse():
            yield event.event, event.data


_io: tuple[int, asyncio.AbstractEventLoop] | None = None
_io_lock = threading.Lock()


def _io_loop() -> asyncio.AbstractEventLoop:
    """The loop of this process's I/O thread, started on first use.

    A forked child starts its own: the parent's thread did not come along.
    """
    global _io
    with _io_lock:
        if _io is None or _io[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="collective-http", daemon=True).start()
            _io = (os.getpid(), loop)
        return _io[1]
