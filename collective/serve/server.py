"""Run `collective serve`: bind the socket, open the councils, serve until stopped.

The socket is bound before anything else, so that a port in use is a clear error at once and
`--port 0` can say which port it got; uvicorn serves the application on it. Stopping (Ctrl-C,
SIGTERM) closes the connections, cancels the runs still going and closes the session.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from collective.errors import ConfigError

if TYPE_CHECKING:
    from collective.config import CollectiveConfig
    from collective.serve.runs import Councils
    from collective.serve.settings import ServeSettings

__all__ = ["bind", "open_councils", "serve", "url_of"]


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host:port`.

    Raises:
        ConfigError: The address cannot be bound (in use, not this machine's, no permission).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(
            f"cannot listen on {host}: {exc.strerror}; give --host an address"
        ) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port (0: any free)"
        ) from None
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket) -> str:
    """`http://HOST:PORT` of a bound socket."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


async def open_councils(
    config: CollectiveConfig,
    settings: ServeSettings,
    stack: AsyncExitStack,
    *,
    named: Mapping[str, CollectiveConfig] | None = None,
    on_note: Callable[[str], None] = lambda note: None,
) -> Councils:
    """The councils, with the servers each needs checked once (a failure is a note, not fatal).

    A model server that is down when the server starts may be up by the first question; the
    question then gets the error in OpenAI's shape if it is not.
    """
    from collective.errors import BackendUnavailable
    from collective.serve.runs import Councils
    from collective.session import preflight

    councils = await Councils.open(config, settings, stack, named=named)
    stack.push_async_callback(councils.close)  # runs first: before the session closes
    for name, council in councils.configs.items():
        try:
            for note in await preflight(council):
                on_note(f"{name}: {note}")
        except BackendUnavailable as exc:
            on_note(f"{name}: {exc}")
    return councils


def serve(
    config: CollectiveConfig,
    settings: ServeSettings,
    *,
    named: Mapping[str, CollectiveConfig] | None = None,
    on_ready: Callable[[str], None],
    on_note: Callable[[str], None],
) -> None:
    """Serve the OpenAI-compatible API (and the page) until stopped.

    Args:
        config: The configured council.
        settings: Where to listen, the key and the limits.
        named: Further councils by name.
        on_ready: Told the URL once requests are answered.
        on_note: Told what a person starting the server should know (servers down, no key).
    """
    import uvicorn

    from collective.serve.app import create_app

    sock = bind(settings.host, settings.port)

    async def main() -> None:
        async with AsyncExitStack() as stack:
            councils = await open_councils(config, settings, stack, named=named, on_note=on_note)
            app = create_app(councils, settings)
            server = uvicorn.Server(_uvicorn_config(app))
            ready = asyncio.get_running_loop().create_task(_when_started(server))
            ready.add_done_callback(lambda t: None if t.cancelled() else on_ready(url_of(sock)))
            await server.serve(sockets=[sock])

    try:
        asyncio.run(main())
    finally:
        sock.close()


def _uvicorn_config(app: Any) -> Any:
    import uvicorn

    # No access log (a question's text is in no URL, but the log is noise); short grace on stop.
    return uvicorn.Config(
        app, lifespan="off", log_level="warning", access_log=False, timeout_graceful_shutdown=5
    )


async def _when_started(server: Any) -> None:
    while not server.started:
        await asyncio.sleep(0.02)
