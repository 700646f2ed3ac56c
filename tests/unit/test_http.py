"""`collective.models.http`, the one HTTP choke point, against a real local socket server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest

from collective.errors import BackendUnavailable, InvalidResponse
from collective.models.http import HttpServer
from collective.models.openai_compat import StreamedReply

Reply = Callable[[str, str, int], bytes]
"""(method, path, how many requests came before) -> the raw HTTP response."""


def _response(status: int, body: bytes, content_type: str = "application/json") -> bytes:
    head = (
        f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class Server:
    """A real HTTP/1.1 server on a local port, answering each request with `reply`."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.seen: list[str] = []
        self.url = ""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        method, path, _ = head.split(" ", 2)
        length = next(
            (
                int(line.split(":")[1])
                for line in head.lower().splitlines()
                if "content-length" in line
            ),
            0,
        )
        await reader.readexactly(length)
        self.seen.append(f"{method} {path}")
        writer.write(self.reply(method, path, len(self.seen) - 1))
        await writer.drain()
        writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Reply], Server]]:
    servers = []

    def start(reply: Reply) -> Server:
        server = Server(reply)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.task.close()


async def _started(server: Server) -> Server:
    server.task = await asyncio.start_server(server._serve, "127.0.0.1", 0)
    server.url = f"http://127.0.0.1:{server.task.sockets[0].getsockname()[1]}"
    return server


def _http(url: str, **options) -> HttpServer:
    return HttpServer(url, server="test server", how_to_start=lambda: "Start it.", **options)


async def test_an_event_whose_data_spans_several_lines_is_one_event(serve):
    """The hand-written parser read each `data:` line as a chunk of its own."""
    events = (
        'data: {"choices": [{"delta":\ndata: {"content": "Hel"}}]}\n\n'
        'data: {"choices": [{"delta": {"content": "lo"}, "finish_reason": "stop"}]}\n\n'
        "data: [DONE]\n\n"
    )
    server = await _started(
        serve(lambda m, p, n: _response(200, events.encode(), "text/event-stream"))
    )
    reply = StreamedReply(server.url)
    http = _http(server.url)
    async for event, data in http.stream("/v1/chat/completions", {}, refuse=_never):
        reply.feed(data, event)
    assert "".join(reply.text) == "Hello" and reply.finish_reason == "stop"
    await http.aclose()


async def test_a_503_is_waited_out_once_then_the_request_is_sent_again(serve):
    def reply(method: str, path: str, n: int) -> bytes:
        if path == "/health":
            return _response(200, b"{}")
        return _response(503 if n == 0 else 200, b'{"ok": true}')

    server = await _started(serve(reply))
    http = _http(server.url)
    assert await http.call("POST", "/tokenize", {}, refuse=_never) == {"ok": True}
    assert server.seen == ["POST /tokenize", "GET /health", "POST /tokenize"]
    await http.aclose()


async def test_a_refusal_is_the_callers_error_and_a_non_sse_reply_is_invalid(serve):
    server = await _started(serve(lambda m, p, n: _response(400 if n == 0 else 200, b"{}")))
    http = _http(server.url)
    with pytest.raises(InvalidResponse, match="HTTP 400"):
        await http.call("POST", "/x", {}, refuse=lambda s, d: InvalidResponse(f"HTTP {s}"))
    with pytest.raises(InvalidResponse, match="server-sent events"):
        async for _ in http.stream("/x", {}, refuse=_never):
            pass
    await http.aclose()


async def test_a_worker_thread_calls_through_the_same_choke_point(serve):
    """Token counters count from worker threads: the same coroutine, on the I/O thread."""
    server = await _started(serve(lambda m, p, n: _response(200, json.dumps({"n": n}).encode())))
    http = _http(server.url)
    got = await asyncio.to_thread(lambda: http.blocking(http.request("POST", "/tokenize", {})))
    assert got == (200, {"n": 0})
    await asyncio.to_thread(http.close)


async def test_no_server_is_one_clear_error_naming_the_url_and_the_fix():
    failures: list[str] = []
    http = _http("http://127.0.0.1:9", on_failure=lambda: failures.append("forgot"))
    with pytest.raises(BackendUnavailable, match=r"127\.0\.0\.1:9.*Start it\."):
        await http.request("GET", "/health")
    assert failures == ["forgot"]


def _never(status: int, data: object) -> Exception:
    raise AssertionError(f"unexpected HTTP {status}: {data}")


async def test_a_connection_closed_without_a_response_is_retried_once_on_a_fresh_one(serve):
    """A keep-alive connection the server closes as the request goes out: nothing was done."""
    server = await _started(serve(lambda m, p, n: b"" if n == 0 else _response(200, b"{}")))
    http = _http(server.url)
    assert await http.request("POST", "/tokenize", {}) == (200, {})
    assert server.seen == ["POST /tokenize", "POST /tokenize"]
    events = b"data: {}\n\n"
    stream = await _started(
        serve(lambda m, p, n: b"" if n == 0 else _response(200, events, "text/event-stream"))
    )
    http = _http(stream.url)
    assert [d async for _, d in http.stream("/v1/chat/completions", {}, refuse=_never)] == ["{}"]
    assert len(stream.seen) == 2
    closing = await _started(serve(lambda m, p, n: b""))  # twice: the server is going away
    with pytest.raises(BackendUnavailable, match="may have stopped or restarted"):
        await _http(closing.url).request("GET", "/health")
