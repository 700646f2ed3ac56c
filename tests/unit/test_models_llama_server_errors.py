"""llama-server response parsing and error translation, over real local sockets."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from collective.errors import BackendTimeout, BackendUnavailable, ContextOverflow, InvalidResponse
from collective.models.llama_server import LlamaServerBackend, PromptMemo
from collective.models.openai_compat import http_error as _http_error
from collective.models.openai_compat import parse_chat_response

COMPLETION = {
    "model": "gemma",
    "choices": [
        {
            "finish_reason": "tool_calls",
            "message": {
                "content": None,
                "tool_calls": [
                    {"id": "c1", "function": {"name": "search", "arguments": '{"q": "PETG"}'}}
                ],
            },
        }
    ],
    "usage": {
        "prompt_tokens": 42,
        "completion_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 30},
    },
    "timings": {"prompt_n": 12, "cache_n": 30, "predicted_per_second": 55.5},
}


def test_parse_chat_response_maps_usage_tool_calls_and_timings() -> None:
    result = parse_chat_response(COMPLETION, url="u", wall_ms=3.0)
    assert result.text == ""
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (42, 7)
    assert result.usage.cached_tokens == 30
    assert result.tool_calls[0].name == "search" and result.tool_calls[0].arguments == {"q": "PETG"}
    assert result.timings == {
        "prompt_n": 12.0,
        "cache_n": 30.0,
        "predicted_per_second": 55.5,
        "wall_ms": 3.0,
    }


def test_parse_chat_response_refuses_bodies_without_choices() -> None:
    with pytest.raises(InvalidResponse, match="u"):
        parse_chat_response({"object": "error"}, url="u", wall_ms=1.0)


def test_exceed_context_size_error_carries_the_servers_numbers() -> None:
    error = _http_error(
        400,
        {
            "error": {
                "code": 400,
                "type": "exceed_context_size_error",
                "message": "too big",
                "n_prompt_tokens": 5000,
                "n_ctx": 4096,
            }
        },
        "http://h:1",
    )
    assert isinstance(error, ContextOverflow)
    assert (error.n_prompt_tokens, error.n_ctx) == (5000, 4096)
    assert "n_ctx=4096" in str(error)


class _Garbage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html>not llama-server</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def garbage_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_a_server_answering_html_is_an_invalid_response(garbage_url: str) -> None:
    b = LlamaServerBackend(garbage_url)
    with pytest.raises(InvalidResponse, match="not JSON"):
        await b.context_window()
    await b.aclose()


async def test_refused_connection_names_the_url_and_how_to_start() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = LlamaServerBackend(f"http://127.0.0.1:{port}")
    with pytest.raises(BackendUnavailable) as info:
        await b.context_window()
    assert f"127.0.0.1:{port}" in str(info.value)
    assert f"ops/llama-server/launch.sh --port {port}" in str(info.value)
    health = await b.health()
    assert not health.ok
    await b.aclose()


async def test_a_server_that_never_answers_is_a_timeout() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts connections (kernel backlog) but never responds
    try:
        b = LlamaServerBackend(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.3)
        with pytest.raises(BackendTimeout, match="did not answer in time"):
            await b.context_window()
        await b.aclose()
    finally:
        listener.close()


def test_prompt_memo_keeps_the_most_recently_used_counts() -> None:
    memo = PromptMemo(size=2)
    a, b, c = (PromptMemo.key({"messages": [{"role": "user", "content": x}]}) for x in "abc")
    memo.put(a, 1)
    memo.put(b, 2)
    assert memo.get(a) == 1  # a is now the most recent
    memo.put(c, 3)
    assert (memo.get(a), memo.get(b), memo.get(c)) == (1, None, 3)
    assert PromptMemo.key({"x": 1, "y": 2}) == PromptMemo.key({"y": 2, "x": 1})
    memo.clear()
    assert memo.get(a) is None
