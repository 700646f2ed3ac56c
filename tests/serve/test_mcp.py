"""`collective mcp` driven by the official `mcp` client, over stdio and over streamable HTTP.

The council's models are the scripted OpenAI-protocol server (tests/serve/servers.py): list the
tools, call `ask` with progress notifications, cancel a call mid-run (its model calls end),
`recall`, `kb_add` (offered only when enabled) and the HTTP transport's API key.
"""

from __future__ import annotations

import asyncio
import os
import sys

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.serve.servers import Process, council_config, model_server

KEY = "mcp-key-51c2"
HOT_CAR = "Which filament should I use for a part that sits in a hot car?"


@pytest.fixture(scope="module")
def models():
    server = model_server(latency_s=0.1)
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def quick(models):
    models.latency_s = 0.1
    yield
    models.latency_s = 0.1


@pytest.fixture(scope="module")
def config(models, tmp_path_factory):
    directory = tmp_path_factory.mktemp("mcp")
    return directory, council_config(directory, models)


@pytest.fixture(scope="module")
def http_server(config):
    directory, path = config
    args = ["mcp", "--transport", "http", "--port", "0", "--config", str(path)]
    process = Process(args, directory, env={"COLLECTIVE_SERVE_API_KEY": KEY}).wait_ready()
    yield process
    assert process.stop() == 0, "".join(process.lines)


def stdio_client(config, *extra: str) -> Client:
    directory, path = config
    command = ["-m", "collective.cli", "mcp", "--config", str(path), *extra]
    env = {k: v for k, v in os.environ.items() if k.startswith(("COLLECTIVE_", "PYTHON", "PATH"))}
    parameters = StdioServerParameters(
        command=sys.executable, args=command, cwd=str(directory), env=env
    )
    return Client(parameters, read_timeout_seconds=180)


def http_client(server: Process, key: str = KEY) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=180)
    return Client(streamable_http_client(f"{server.url}/mcp", http_client=http))


@pytest.fixture(params=["stdio", "http"])
def connect(request, config):
    if request.param == "stdio":
        return lambda: stdio_client(config)
    server = request.getfixturevalue("http_server")
    return lambda: http_client(server)


async def until(check, timeout: float = 60) -> bool:
    end = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < end:
        if check():
            return True
        await asyncio.sleep(0.05)
    return bool(check())


async def test_tools_are_listed(connect):
    async with connect() as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"ask", "recall"}  # kb_add is off unless enabled
    assert "question" in tools["ask"].input_schema["required"]
    assert set(tools["ask"].input_schema["properties"]) >= {"thread", "mode", "k", "retrieval"}


async def test_ask_reports_progress_and_returns_the_checked_verdict(connect):
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with connect() as client:
        result = await client.call_tool(
            "ask", {"question": HOT_CAR, "k": 2}, progress_callback=on_progress
        )
    assert not result.is_error, result.content
    out = result.structured_content
    assert out["citations"] and f"[KB#{out['citations'][0]['id']}]" in out["verdict"]
    assert {c["status"] for c in out["claims"]} >= {"supported", "dropped"}
    assert "9999" not in out["verdict"]
    assert out["usage"]["completion_tokens"] > 0 and out["thread"]
    messages = [m for _, _, m in progress]
    assert any(m and m.startswith("specialist-1: running") for m in messages)
    assert any(m and m.startswith("judge: done") for m in messages)
    values = [p for p, _, _ in progress]
    assert values == sorted(values) and values[-1] == progress[-1][1] == 4  # retrieve, 2, judge


async def _specialists_called(models, start: int) -> bool:
    return await until(
        lambda: models.in_flight > 0 and any(m == "specialist" for m, _ in models.prompts[start:]),
        timeout=60,
    )


async def test_cancelling_a_call_cancels_its_council(connect, models):
    question = f"{HOT_CAR} (cancelled over MCP)"
    models.latency_s = 30  # an answer takes 30 s: only a cancelled call ends sooner
    start, dropped = len(models.prompts), models.dropped
    async with connect() as client:
        call = asyncio.create_task(client.call_tool("ask", {"question": question}))
        assert await _specialists_called(models, start)
        call.cancel()  # the client sends notifications/cancelled
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await until(lambda: models.in_flight == 0, timeout=60)
        assert models.dropped > dropped and models.finished(question) == []
        # The server goes on serving the same session.
        assert {t.name for t in (await client.list_tools()).tools} >= {"ask"}


async def test_recall_returns_chunks_with_their_tags(connect):
    async with connect() as client:
        result = await client.call_tool("recall", {"query": "PETG heat resistance"})
    chunks = result.structured_content["chunks"]
    assert chunks and all(c["tag"] == f"[KB#{c['id']}]" and c["text"] for c in chunks)


async def test_kb_add_only_when_enabled(config, tmp_path):
    note = tmp_path / "quokka.md"
    note.write_text("# Quokka resin\n\nQuokka resin softens at 212 C and smells of pine.\n")
    async with stdio_client(config, "--kb-add") as client:
        assert "kb_add" in {t.name for t in (await client.list_tools()).tools}
        secret = tmp_path / "secret.py"
        secret.write_text("TOKEN = 'not for the KB'\n")
        paths = [str(note), str(tmp_path / "none.md"), str(secret)]
        added = await client.call_tool("kb_add", {"paths": paths})
        out = added.structured_content
        assert out["added"] >= 1
        refused = {r["path"]: r["reason"] for r in out["refused"]}
        assert refused[str(tmp_path / "none.md")] == "no such file or directory"
        assert refused[str(secret)].startswith("not a Markdown/text file")
        found = await client.call_tool("recall", {"query": "Quokka resin softening"})
    assert any("Quokka resin" in c["text"] for c in found.structured_content["chunks"])


async def test_http_needs_the_key(http_server):
    plain = httpx.post(
        f"{http_server.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    assert plain.status_code == 401 and plain.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(Exception):  # noqa: B017  (the client's own error for a 401)
        async with http_client(http_server, key="wrong") as client:
            await client.list_tools()
