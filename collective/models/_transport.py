"""Translation of transport failures into `collective.errors`, shared by the HTTP backends.

Every HTTP backend funnels its exceptions through `translate_transport_error` so that callers
see exactly four failure types, each naming the URL and saying what to do.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from collective.errors import BackendError, BackendTimeout, BackendUnavailable, InvalidResponse

__all__ = ["LoopLocal", "parse_json", "translate_transport_error"]


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
