"""Streaming on the real servers: llama-server, the Ollama-protocol server and llama.cpp in process.

Each backend's stream arrives in pieces, and the pieces add up to the answer the server gives
without streaming (temperature 0), with the server's own usage. Cancelling a consumer stops the
generation: llama-server frees the slot, the in-process loop stops between tokens, and the next
call runs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import httpx
import ollama
import pytest
from conftest import (
    OLLAMA_MODEL,
    ServerProcess,
    free_port,
    llama_server_argv,
    need_llama_cpp,
)

from collective.budget.counting import ChatMessage
from collective.models.base import Backend, ChatDelta, ChatResult, collect
from collective.models.batch_engine import GenerationRequest
from collective.models.llama_server import LlamaServerBackend
from collective.models.llamacpp_in_process import GEMMA_TEMPLATE, LlamaCppBackend
from collective.models.ollama_api import OllamaBackend
from collective.models.openai_api import OpenAIBackend

pytestmark = pytest.mark.integration

COUNT: list[ChatMessage] = [
    {"role": "user", "content": "Count from one to twenty in words, separated by commas."}
]
MAX_TOKENS = 24
ENDLESS = {"type": "string", "minLength": 20_000, "maxLength": 20_000}
"""An answer held to it cannot end within 600 tokens (gemma's longest token is 31 bytes); one
length, as a range would nest 20,000 optional rules in llama.cpp's grammar (it crashed)."""
TEMPLATE = str(resources.files("collective") / "data/templates/gemma.jinja")


@pytest.fixture(scope="module")
def gemma_server(llama_server_binary: str, gguf_path: Path) -> Iterator[ServerProcess]:
    """llama-server with the gemma turn template (the embedded default's), 2 slots of 1,024."""
    port = free_port()
    argv = [*llama_server_argv(llama_server_binary, gguf_path, port, 2048, 2)]
    argv += ["--chat-template-file", TEMPLATE]
    server = ServerProcess(argv, port, "/health", name="llama-server-stream")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def in_process(gguf_path: Path) -> LlamaCppBackend:
    need_llama_cpp()
    return LlamaCppBackend(gguf_path, n_ctx=1024, chat_template=GEMMA_TEMPLATE)


async def drain(backend: Backend, messages: list[ChatMessage]) -> tuple[list[str], ChatResult]:
    """The pieces of a streamed answer, in order, and its result."""
    pieces: list[str] = []

    def on_delta(delta: ChatDelta) -> None:
        pieces.append(delta.text)

    result = await collect(
        backend.stream(messages, max_tokens=MAX_TOKENS, temperature=0.0), on_delta
    )
    return pieces, result


def check_stream(pieces: list[str], result: ChatResult, text: str, usage: tuple[int, int]) -> None:
    # incremental, not one lump at the end (an answer of one token is one piece)
    assert len([p for p in pieces if p]) > 1 or usage[1] <= 1, pieces
    assert "".join(pieces) == result.text == text  # equals the server's whole answer
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == usage
    assert result.timings["ttft_ms"] <= result.timings["wall_ms"]


async def test_llama_server_stream_equals_its_whole_answer(gemma_server: ServerProcess) -> None:
    backend = LlamaServerBackend(gemma_server.url)
    try:
        pieces, result = await drain(backend, COUNT)
        body = {"messages": COUNT, "max_tokens": MAX_TOKENS, "temperature": 0.0, "stream": False}
        async with httpx.AsyncClient(base_url=gemma_server.url, timeout=120) as client:
            whole = (await client.post("/v1/chat/completions", json=body)).json()
        usage = whole["usage"]
        check_stream(
            pieces,
            result,
            whole["choices"][0]["message"]["content"],
            (usage["prompt_tokens"], usage["completion_tokens"]),
        )
        assert result.timings["predicted_n"] == usage["completion_tokens"]  # final chunk's
    finally:
        await backend.aclose()


async def test_ollama_stream_equals_its_whole_answer(ollama_server: ServerProcess) -> None:
    backend = OllamaBackend(OLLAMA_MODEL, ollama_server.url, num_ctx=1024)
    try:
        pieces, result = await drain(backend, COUNT)
        whole = await ollama.AsyncClient(host=ollama_server.url).chat(
            model=OLLAMA_MODEL,
            messages=COUNT,
            stream=False,
            options={"num_ctx": 1024, "num_predict": MAX_TOKENS, "temperature": 0.0},
        )
        assert whole.prompt_eval_count is not None and whole.eval_count is not None
        check_stream(
            pieces, result, whole.message.content or "", (whole.prompt_eval_count, whole.eval_count)
        )
        assert not result.warnings  # the truncation check ran on the final message's counts
    finally:
        await backend.aclose()


async def test_in_process_stream_equals_create_completion(
    in_process: LlamaCppBackend, gguf_path: Path
) -> None:
    from llama_cpp import Llama

    pieces, result = await drain(in_process, COUNT)
    chat = await in_process._loaded()
    ids, stop = chat.prompt_tokens(COUNT)
    # llama-cpp-python's own completion on a model of its own: the engine samples as it does.
    llama = Llama(model_path=str(gguf_path), n_ctx=1024, verbose=False)
    try:
        whole = llama.create_completion(
            prompt=ids, max_tokens=MAX_TOKENS, temperature=0.0, stop=stop
        )
    finally:
        llama.close()
    usage = whole["usage"]  # type: ignore[index]
    check_stream(
        pieces,
        result,
        whole["choices"][0]["text"],  # type: ignore[index]
        (usage["prompt_tokens"], usage["completion_tokens"]),
    )


async def first_pieces_then_cancel(
    backend: Backend, n: int, json_schema: dict | None = None
) -> list[str]:
    """Start a long answer, cancel its consumer after `n` pieces; the pieces seen."""
    seen: list[str] = []
    arrived = asyncio.Event()

    def on_delta(delta: ChatDelta) -> None:
        seen.append(delta.text)
        if len(seen) >= n:
            arrived.set()

    long = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
    # In process, a grammar that cannot end before 20,000 characters (ENDLESS): the answer runs
    # to its 600-token cap whatever the model would write, so the pieces always come.
    task = asyncio.create_task(
        collect(
            backend.stream(long, max_tokens=600, temperature=0.0, json_schema=json_schema),
            on_delta,
        )
    )
    await asyncio.wait_for(arrived.wait(), timeout=300)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return seen


@pytest.mark.parametrize("kind", ["llama-server", "openai"])
async def test_cancelling_a_llama_server_stream_frees_the_slot(
    gemma_server: ServerProcess, kind: str
) -> None:
    # The same server through its own backend and through the `openai:` one.
    url = gemma_server.url
    backend = LlamaServerBackend(url) if kind == "llama-server" else OpenAIBackend("gemma", url)
    try:
        seen = await first_pieces_then_cancel(backend, 3)
        assert len(seen) >= 3
        async with httpx.AsyncClient(base_url=gemma_server.url, timeout=30) as client:
            for _ in range(300):  # generous: the server notices the closed socket at its next token
                slots = (await client.get("/slots")).json()
                if not any(slot["is_processing"] for slot in slots):
                    break
                await asyncio.sleep(0.1)
            assert not any(slot["is_processing"] for slot in slots), slots
            # The slot stopped well before the 600 tokens asked for.
            assert all(slot.get("next_token", [{}])[0].get("n_decoded", 0) < 600 for slot in slots)
        # The backend goes on serving.
        again = await backend.chat(COUNT, max_tokens=4, temperature=0.0)
        assert again.finish_reason in ("stop", "length") and again.usage.completion_tokens <= 4
    finally:
        await backend.aclose()


async def test_cancelling_in_process_stops_between_tokens(in_process: LlamaCppBackend) -> None:
    seen = await first_pieces_then_cancel(in_process, 3, ENDLESS)
    assert len(seen) >= 3
    # The engine ends that sequence at its next step (it would run for 600 tokens otherwise),
    # and the next call runs.
    engine = in_process.engine
    for _ in range(1200):
        if not engine._active:
            break
        await asyncio.sleep(0.1)
    assert not engine._active
    again = await in_process.chat(COUNT, max_tokens=4, temperature=0.0)
    assert again.finish_reason in ("stop", "length") and again.usage.completion_tokens <= 4


def test_the_engine_stops_at_the_cancel_flag(in_process: LlamaCppBackend) -> None:
    chat = in_process._load_sync()
    ids, stop = chat.prompt_tokens(COUNT)
    cancel = threading.Event()
    pieces: list[str] = []

    def on_text(text: str) -> None:
        pieces.append(text)
        if len(pieces) == 2:
            cancel.set()

    out = in_process.engine.generate(
        GenerationRequest(ids, 200, temperature=0.0, stop=stop, on_text=on_text, cancel=cancel)
    )
    assert out.finish_reason == "cancelled"
    # stopped within a token of the flag (a piece is >= 1 token)
    assert out.completion_tokens <= 3 + len(pieces)
    assert out.text.startswith("".join(pieces))
