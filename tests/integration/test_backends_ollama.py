"""The Ollama backend over real HTTP against the Ollama-protocol server (real gemma model)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import ollama
import pytest
from conftest import (
    OLLAMA_CONTEXT_LENGTH,
    OLLAMA_DEFAULT_NUM_CTX,
    OLLAMA_MODEL,
    OLLAMA_MODELFILE_NUM_CTX,
    ServerProcess,
    free_port,
)
from test_backends_contract import SHORT, BackendContract

from collective.budget.assembly import text_section
from collective.budget.counting import ChatMessage, EstimateCounter
from collective.budget.plans import ModelBudget
from collective.budgeted_call import budgeted_call
from collective.errors import BackendUnavailable, ContextOverflow, InvalidResponse
from collective.graph.context import CouncilContext
from collective.models.ollama_api import OllamaBackend

pytestmark = pytest.mark.integration

NUM_CTX = 2048
SMALL_CTX = 1024  # for the tests that make the server evaluate a whole window
ADHESION = "Layer adhesion improves with a warmer nozzle. " * 170  # about 1,360 tokens


def digits(n: int, seed: int = 7) -> str:
    """Text that costs about one token per character: an estimate undercounts it ~3x."""
    rng = random.Random(seed)
    return "".join(rng.choice("0123456789") for _ in range(n))


@pytest.fixture
async def backend(ollama_server: ServerProcess) -> AsyncIterator[OllamaBackend]:
    b = OllamaBackend(OLLAMA_MODEL, ollama_server.url, num_ctx=NUM_CTX)
    try:
        yield b
    finally:
        await b.aclose()


class TestOllamaContract(BackendContract):
    expected_n_ctx = NUM_CTX
    expected_counter_kind = "exact:gguf-vocab"
    # The count renders llama.cpp's ChatML fallback (the GGUF has no template); Ollama renders
    # its own gemma3 Go template, which costs fewer tokens per message.
    prompt_count_slack_per_message = 16


async def test_discovery_reads_context_length_and_modelfile_num_ctx(
    ollama_server: ServerProcess,
) -> None:
    b = OllamaBackend(OLLAMA_MODEL, ollama_server.url)
    try:
        info = await b.discover()
        assert info.context_length == OLLAMA_CONTEXT_LENGTH
        assert info.modelfile_num_ctx == OLLAMA_MODELFILE_NUM_CTX
        assert info.architecture == "gemma3"
        assert await b.context_window() == OLLAMA_MODELFILE_NUM_CTX
        assert not b.supports_tools  # capabilities: completion only
        capped = OllamaBackend(OLLAMA_MODEL, ollama_server.url, num_ctx=10**6)
        assert await capped.context_window() == OLLAMA_CONTEXT_LENGTH
        await capped.aclose()
    finally:
        await b.aclose()


async def test_num_ctx_and_num_predict_are_always_sent(backend: OllamaBackend) -> None:
    # The server defaults num_ctx to 1,024 when not told; a 1,360-token prompt under the
    # backend's explicit num_ctx of 2,048 is evaluated whole.
    result = await backend.chat([{"role": "user", "content": ADHESION}], max_tokens=3)
    assert result.usage.prompt_tokens > OLLAMA_DEFAULT_NUM_CTX
    assert result.usage.completion_tokens <= 3
    assert not result.warnings


async def test_naive_client_is_truncated_silently(ollama_server: ServerProcess) -> None:
    """The failure this project exists to prevent: no num_ctx, no error, a cut prompt."""
    client = ollama.AsyncClient(host=ollama_server.url)
    response = await client.chat(
        model=OLLAMA_MODEL,
        messages=[{"role": "user", "content": ADHESION}],
        options={"num_predict": 2},
    )
    assert response.prompt_eval_count == OLLAMA_DEFAULT_NUM_CTX
    assert response.done


async def test_exact_count_refuses_before_sending(backend: OllamaBackend) -> None:
    with pytest.raises(ContextOverflow, match="nothing was sent") as info:
        await backend.chat([{"role": "user", "content": digits(3000)}], max_tokens=8)
    assert info.value.n_ctx == NUM_CTX and info.value.n_prompt_tokens > NUM_CTX


async def test_truncation_by_the_runner_is_detected_loudly(
    old_ollama_server: ServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """A remote Ollama (no local blob) leaves only the estimate; dense text fools it, an Ollama
    too old to honour `truncate: false` cuts the prompt, and prompt_eval_count gives it away."""
    b = OllamaBackend(
        OLLAMA_MODEL, old_ollama_server.url, num_ctx=SMALL_CTX, counter=EstimateCounter()
    )
    content = digits(1500)
    try:
        counted = await b.count_prompt([{"role": "user", "content": content}])
        assert counted + 8 <= SMALL_CTX  # the estimate believes it fits
        result = await b.chat([{"role": "user", "content": content}], max_tokens=8)
    finally:
        await b.aclose()
    assert result.usage.prompt_tokens == SMALL_CTX
    assert len(result.warnings) == 1
    assert "OLLAMA TRUNCATED THE PROMPT" in result.warnings[0]
    assert "OLLAMA TRUNCATED THE PROMPT" in caplog.text


async def test_dropped_old_messages_are_detected(old_ollama_server: ServerProcess) -> None:
    b = OllamaBackend(
        OLLAMA_MODEL, old_ollama_server.url, num_ctx=SMALL_CTX, counter=EstimateCounter()
    )
    messages: list[ChatMessage] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Remember these digits: " + digits(1500)},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Say OK."},
    ]
    try:
        result = await b.chat(messages, max_tokens=4)
    finally:
        await b.aclose()
    # Ollama kept the system message and the last turns only.
    assert result.usage.prompt_tokens < 100
    assert any("dropped" in w for w in result.warnings)


async def test_current_ollama_refuses_instead_of_truncating_and_collective_refits(
    ollama_server: ServerProcess,
) -> None:
    """`truncate: false` is sent: the server answers 400 with both counts, which becomes
    `ContextOverflow`, and the budgeted call refits to the server's numbers once."""
    b = OllamaBackend(OLLAMA_MODEL, ollama_server.url, num_ctx=SMALL_CTX, counter=EstimateCounter())
    content = digits(1500)  # the estimate believes it fits; it costs ~1,500 tokens
    try:
        with pytest.raises(ContextOverflow, match="asked it not to truncate") as info:
            await b.chat([{"role": "user", "content": content}], max_tokens=8)
        assert info.value.n_ctx == SMALL_CTX and info.value.n_prompt_tokens > SMALL_CTX
        plan = ModelBudget(
            name="chat",
            n_ctx=SMALL_CTX,
            prompt_budget=900,
            output_budget=8,
            sections={"system": 40, "task": 860},
        )
        call = await budgeted_call(
            CouncilContext(budgets={"chat": plan}, temperature=0.0),
            role="chat",
            agent="chat",
            backend=b,
            contents=[text_section("system", "Be terse."), text_section("task", content)],
            compose=lambda s: [
                {"role": "system", "content": s["system"]},
                {"role": "user", "content": s["task"]},
            ],
            question="digits",
        )
        pool = await b.pool()
    finally:
        await b.aclose()
    assert call.overflow is not None  # refused once, refitted, answered
    assert call.result.usage.prompt_tokens <= SMALL_CTX and not call.result.warnings
    # /api/ps reports the context the model is loaded with.
    assert f"/api/ps context_length {SMALL_CTX}" in pool.source
    assert (pool.slots, pool.slot_ctx) == (1, SMALL_CTX)


async def test_think_is_passed_through(ollama_server: ServerProcess) -> None:
    b = OllamaBackend(OLLAMA_MODEL, ollama_server.url, num_ctx=NUM_CTX, think=True)
    try:
        with pytest.raises(InvalidResponse, match="does not support thinking"):
            await b.chat(SHORT, max_tokens=4)
    finally:
        await b.aclose()


async def test_streaming_and_the_other_endpoints(ollama_server: ServerProcess) -> None:
    client = ollama.AsyncClient(host=ollama_server.url)
    parts = [
        part
        async for part in await client.chat(
            model=OLLAMA_MODEL,
            messages=SHORT,
            stream=True,
            options={"num_ctx": NUM_CTX, "num_predict": 6, "temperature": 0},
        )
    ]
    # streamed: pieces, then one closing part with the counts (what the pieces say is gemma's)
    assert parts[-1].done and not any(p.done for p in parts[:-1])
    assert parts[-1].prompt_eval_count and (parts[-1].eval_count or 0) <= 6 + 1
    assert all(isinstance(p.message.content or "", str) for p in parts)
    tags = await client.list()
    assert [m.model for m in tags.models] == [OLLAMA_MODEL]
    version = await client._request_raw("GET", "/api/version")  # the client has no wrapper
    assert version.json()["version"]


async def test_unknown_model_and_refused_connection_say_what_to_do(
    ollama_server: ServerProcess,
) -> None:
    missing = OllamaBackend("no-such-model", ollama_server.url)
    with pytest.raises(BackendUnavailable, match="ollama pull no-such-model"):
        await missing.context_window()
    url = f"http://127.0.0.1:{free_port()}"
    down = OllamaBackend(OLLAMA_MODEL, url)
    with pytest.raises(BackendUnavailable) as info:
        await down.context_window()
    assert url in str(info.value) and "ollama serve" in str(info.value)
    assert not (await down.health()).ok


async def test_no_confidence_is_made_up_and_the_answer_says_why(backend: OllamaBackend) -> None:
    result = await backend.chat([{"role": "user", "content": "Name a colour."}], max_tokens=4)
    assert result.usage.completion_tokens > 0
    assert result.confidence is None
    assert result.confidence_note and "Ollama" in result.confidence_note
