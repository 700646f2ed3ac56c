"""The llama-server backend against the real llama-server (gemma, `-c 8192 -np 2`)."""

from __future__ import annotations

import math
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Mapping

import httpx
import pytest
from conftest import ServerProcess, free_port, llama_server_argv
from test_backends_contract import SHORT, BackendContract

from collective.budget.assembly import text_section
from collective.budget.counting import ChatMessage
from collective.budget.plans import ModelBudget
from collective.budgeted_call import ModelCall, budgeted_call
from collective.errors import BackendTimeout, BackendUnavailable, ContextOverflow
from collective.graph.context import CouncilContext
from collective.models.confidence import Confidence
from collective.models.llama_server import LlamaServerBackend
from collective.models.openai_compat import parse_chat_response

pytestmark = pytest.mark.integration

SLOT = 4096  # 8192 over 2 slots
QUESTION = "In one sentence: which of these notes mentions the heat deflection temperature?"
NOTE = (
    "Note {i}: PETG prints at 230-250 °C, bonds well between layers and has a heat deflection "
    "temperature near 70 °C, so it survives a warm room but not a parked car in summer.\n"
)


def long_notes(n_tokens_hint: int) -> str:
    return "".join(NOTE.format(i=i) for i in range(n_tokens_hint // 35 + 1))


@pytest.fixture
async def backend(llama_server: ServerProcess) -> AsyncIterator[LlamaServerBackend]:
    b = LlamaServerBackend(llama_server.url, load_wait=30)
    try:
        yield b
    finally:
        await b.aclose()


class TestLlamaServerContract(BackendContract):
    expected_n_ctx = SLOT
    expected_counter_kind = "exact:llama-server"


async def test_props_report_the_per_slot_window_not_the_configured_one(
    backend: LlamaServerBackend,
) -> None:
    props = await backend.props()
    assert props["total_slots"] == 2
    assert await backend.context_window() == SLOT  # not the 8192 given to -c
    assert backend.model.startswith("gemma-3-270m")
    # The GGUF has no chat template; llama.cpp's ChatML fallback cannot render tools.
    assert props["chat_template_caps"]["supports_tools"] is False
    assert backend.supports_tools is False


async def test_a_naive_request_sized_for_the_configured_context_gets_http_400(
    llama_server: ServerProcess,
) -> None:
    # What a client that trusts `-c 8192` sends: a prompt of about 6,000 tokens.
    content = long_notes(6000) + QUESTION
    async with httpx.AsyncClient(base_url=llama_server.url, timeout=120) as client:
        response = await client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": content}], "max_tokens": 16},
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "exceed_context_size_error"
    assert error["n_ctx"] == SLOT
    assert error["n_prompt_tokens"] > SLOT


def notes_plan(output: int) -> ModelBudget:
    """A plan for one slot: the question, then as many notes as fit."""
    prompt = SLOT - output
    return ModelBudget("notes", SLOT, prompt, output, {"task": 64, "kb_chunks": prompt - 64})


def compose(sections: Mapping[str, str]) -> list[ChatMessage]:
    return [{"role": "user", "content": sections["kb_chunks"] + "\n" + sections["task"]}]


async def ask_notes(backend: LlamaServerBackend, output: int, events: list) -> ModelCall:
    return await budgeted_call(
        CouncilContext(budgets={"notes": notes_plan(output)}, temperature=0.0),
        role="notes",
        agent="notes",
        backend=backend,
        contents=[text_section("task", QUESTION), text_section("kb_chunks", long_notes(6000))],
        compose=compose,
        question=QUESTION,
        on_event=events.append,
    )


async def test_the_same_content_through_collective_is_fitted_and_answered(
    backend: LlamaServerBackend,
) -> None:
    max_tokens = 32
    call = await ask_notes(backend, max_tokens, [])
    assert call.overflow is None
    assert call.report.n_ctx == SLOT
    counted = await backend.count_prompt(call.prompt.messages)
    assert call.result.usage.prompt_tokens == counted  # our exact count is the server's
    assert counted + max_tokens <= SLOT
    assert counted > SLOT - max_tokens - 64  # and the slot was used, not wasted
    assert call.result.usage.completion_tokens <= max_tokens  # answered within its cap
    timings = call.result.timings
    assert {"prompt_n", "cache_n", "predicted_per_second", "wall_ms"} <= timings.keys()


async def test_server_overflow_with_a_stale_window_is_refitted_to_the_servers_n_ctx(
    llama_server_binary: str, gguf_path: object
) -> None:
    """The server restarts with smaller slots: its 400 carries the new n_ctx, and one refit
    to that number succeeds."""
    port = free_port()
    server = ServerProcess(
        llama_server_argv(llama_server_binary, gguf_path, port, 8192, 2),  # type: ignore[arg-type]
        port,
        "/health",
        name="llama-server-restart",
    )
    server.start()
    b = LlamaServerBackend(server.url, load_wait=30)
    try:
        assert await b.context_window() == SLOT
        server.stop()
        server.start(llama_server_argv(llama_server_binary, gguf_path, port, 4096, 2))  # type: ignore[arg-type]

        # The window read before the restart (the backend re-reads /props only now and then).
        async def stale_window() -> int:
            return SLOT

        b.context_window = stale_window  # type: ignore[method-assign]
        events: list[dict] = []
        call = await ask_notes(b, 16, events)
        del b.context_window  # the backend's own reading again
        assert [e["report"]["n_ctx"] for e in events if e["type"] == "budget"] == [SLOT, 2048]
        assert call.report.n_ctx == 2048
        assert call.overflow is not None and call.overflow.n_ctx == 2048
        assert call.result.usage.prompt_tokens + call.report.max_output_tokens <= 2048
        assert await b.context_window() == 2048  # re-read after the overflow
    finally:
        await b.aclose()
        server.stop()


async def test_server_stopped_mid_test_is_unavailable_then_recovers(
    llama_server_binary: str, gguf_path: object
) -> None:
    port = free_port()
    argv = llama_server_argv(llama_server_binary, gguf_path, port, 4096, 1)  # type: ignore[arg-type]
    server = ServerProcess(argv, port, "/health", name="llama-server-stop")
    server.start()
    b = LlamaServerBackend(server.url, load_wait=30)
    messages: list[ChatMessage] = [{"role": "user", "content": "Say yes."}]
    try:
        assert (await b.chat(messages, max_tokens=4)).usage.completion_tokens > 0
        server.stop()
        with pytest.raises(BackendUnavailable) as info:
            await b.chat(messages, max_tokens=4)
        message = str(info.value)
        assert server.url in message and "launch.sh" in message
        health = await b.health()
        assert not health.ok and server.url in health.detail
        server.start()
        assert (await b.health()).ok
        assert (await b.chat(messages, max_tokens=4)).usage.completion_tokens > 0
    finally:
        await b.aclose()
        server.stop()


async def test_a_prompt_slower_than_the_timeout_is_backend_timeout(
    llama_server: ServerProcess,
) -> None:
    b = LlamaServerBackend(llama_server.url, timeout=0.05, precheck=False)
    # A new prefix, so the slot's prompt cache cannot answer quickly; about 3,000 tokens.
    content = "Timeout probe.\n" + long_notes(2000) + QUESTION
    try:
        with pytest.raises(BackendTimeout) as info:
            await b.chat([{"role": "user", "content": content}], max_tokens=64)
        assert llama_server.url in str(info.value)
    finally:
        await b.aclose()


async def test_count_of_the_sync_counter_equals_the_async_count(
    backend: LlamaServerBackend,
) -> None:
    counter = await backend.token_counter()
    messages: list[ChatMessage] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a filament."},
        {"role": "assistant", "content": "PETG."},
        {"role": "user", "content": "Another?"},
    ]
    assert counter.count_messages(messages) == await backend.count_prompt(messages)


async def test_the_contract_overflow_never_reaches_the_server(
    backend: LlamaServerBackend,
) -> None:
    # Precheck refuses before sending: the message says nothing was sent.
    with pytest.raises(ContextOverflow, match="nothing was sent"):
        await backend.chat([{"role": "user", "content": long_notes(6000)}], max_tokens=8)


async def test_in_process_and_server_count_the_same_prompt_alike(
    backend: LlamaServerBackend, gguf_path: object
) -> None:
    from collective.models.llamacpp_in_process import gguf_vocab_counter

    messages: list[ChatMessage] = [
        {"role": "system", "content": "Cite notes as [KB#id]."},
        {"role": "user", "content": long_notes(300) + QUESTION},
    ]
    local = gguf_vocab_counter(str(gguf_path))
    assert local.count_messages(messages) == await backend.count_prompt(messages)


@pytest.mark.parametrize("mode", ["input_tokens", "apply_template"])
async def test_both_count_routes_equal_the_servers_prompt_tokens(
    llama_server: ServerProcess, mode: str
) -> None:
    b = LlamaServerBackend(llama_server.url, count_mode=mode)
    messages: list[ChatMessage] = [
        {"role": "system", "content": "Answer with one word."},
        {"role": "user", "content": "Which filament is tougher, PLA or PETG? <|im_end|> ok"},
        {"role": "assistant", "content": "PETG."},
        {"role": "user", "content": "And for heat?"},
    ]
    try:
        counted = await b.count_prompt(messages)
        b.prompt_memo.clear()
        assert (await b.token_counter()).count_messages(messages) == counted
        result = await b.chat(messages, max_tokens=2, temperature=0.0)
        assert result.usage.prompt_tokens == counted
        assert b.count_route.input_tokens is (mode == "input_tokens")
    finally:
        await b.aclose()


async def test_a_loading_server_is_waited_for_within_the_bound(
    llama_server_binary: str, gguf_path: object
) -> None:
    port = free_port()
    argv = llama_server_argv(llama_server_binary, gguf_path, port, 8192, 2)  # type: ignore[arg-type]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    impatient = LlamaServerBackend(url, load_wait=0)
    patient = LlamaServerBackend(url, load_wait=60)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the HTTP side listens (it loads after)
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.01)
        health = await patient.health()
        assert not health.ok and "loading" in health.detail  # HTTP 503 while loading
        with pytest.raises(BackendUnavailable, match="still loading"):
            await impatient.context_window()
        assert await patient.context_window() == SLOT  # waited out the 503s
    finally:
        await impatient.aclose()
        await patient.aclose()
        proc.terminate()
        proc.wait(timeout=10)


async def test_members_that_sample_alike_are_one_n_cmpl_request(
    backend: LlamaServerBackend,
) -> None:
    """Two members sampling one prompt alike: one request for two completions (`n_cmpl`), each
    a member's own answer, the call's report one of two completions within the slot."""
    from collective.graph.builder import build_answer_graph
    from collective.kb.store import Chunk
    from tests.fakes import ListStore

    requests: list[dict[str, object]] = []
    stream = backend.stream

    def counted(messages, **options):
        requests.append(options)
        return stream(messages, **options)

    backend.stream = counted  # type: ignore[method-assign]
    ctx = CouncilContext(
        k=2,
        specialists=[backend],
        judge=backend,
        knowledge=ListStore([Chunk("mem_a", "ASA resists heat up to 95 C.", "a.md", score=0.9)]),
        retrieval="lean",
        evidence="shared",
        temperature=0.9,
        member_temperature_step=0.0,
        output_caps={"specialist": 24},
    )
    graph = build_answer_graph(2, judge=False)
    out = await graph.ainvoke({"question": "Which filament survives a hot car?"}, context=ctx)
    assert [r.get("n") for r in requests] == [2]
    assert [p["member"] for p in out["proposals"]] == ["specialist-1", "specialist-2"]
    assert all(p["text"] and not p["error"] for p in out["proposals"])
    (report,) = out["budgets"]
    assert report["completions"] == 2 and report["fits"] and report["n_ctx"] == SLOT
    assert report["output_tokens"] <= 2 * 24


def _sure_of(confidence: Confidence | None, tokens: int) -> Confidence:
    """A confidence read from the server: finite, at most 0, its lowest window at most its mean."""
    assert confidence is not None
    assert 0 < confidence.tokens <= tokens
    assert math.isfinite(confidence.mean) and confidence.mean <= 0.0
    assert confidence.lowest <= confidence.mean
    return confidence


async def test_confidence_is_read_from_the_streamed_logprobs(backend: LlamaServerBackend) -> None:
    result = await backend.chat(SHORT, max_tokens=24, temperature=0.0)
    _sure_of(result.confidence, result.usage.completion_tokens)
    assert result.confidence_note is None
    # several completions of one request (`n_cmpl`): each its own
    both = await backend.chat(SHORT, max_tokens=24, temperature=0.9, n=2)
    assert len(both.samples) == 1
    for answer in (both, both.samples[0]):
        _sure_of(answer.confidence, answer.usage.completion_tokens)


async def test_confidence_is_read_from_a_whole_completion_too(llama_server: ServerProcess) -> None:
    body = {"messages": SHORT, "max_tokens": 24, "temperature": 0.0, "logprobs": True,
            "top_logprobs": 1}  # fmt: skip
    async with httpx.AsyncClient(base_url=llama_server.url, timeout=120) as client:
        response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    result = parse_chat_response(response.json(), url=llama_server.url, wall_ms=0.0)
    got = _sure_of(result.confidence, result.usage.completion_tokens)
    assert got.tokens == result.usage.completion_tokens  # a whole body lists every token
