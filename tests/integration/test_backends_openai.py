"""The `openai:` backend against real servers: the real llama-server's OpenAI endpoints, and a
server that speaks vLLM's API as vLLM's source defines it (tests/integration/
vllm_protocol_server.py), both backed by the real gemma model."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import pytest
from conftest import (
    REPO,
    ServerProcess,
    free_port,
    need_llama_cpp,
    required_call,
    serving_llama_server,
)
from test_backends_contract import SHORT, BackendContract

from collective.budget.assembly import text_section
from collective.budget.counting import ChatMessage
from collective.budget.plans import ModelBudget
from collective.budgeted_call import ModelCall, budgeted_call
from collective.errors import ConfigError, ContextOverflow
from collective.graph.context import CouncilContext
from collective.kb.demo import open_default_store
from collective.kb.tools import VerificationTools
from collective.models.openai_api import OpenAIBackend
from collective.models.openai_compat import NO_LOGPROBS
from collective.models.registry import backend_from_spec, close_all, parse_spec

pytestmark = pytest.mark.integration

MAX_MODEL_LEN = 2048
API_KEY = "sk-test"
MODEL = "google/gemma-3-270m"
SLOT = 4096  # the llama_server fixture: -c 8192 -np 2
NOTE = "Note {i}: PETG prints at 230-250 °C and softens near 70 °C, so not in a hot car.\n"
QUESTION = "In one sentence: which note mentions the softening temperature?"


def vllm_protocol_server(gguf_path: Path, *flags: str) -> Iterator[ServerProcess]:
    need_llama_cpp()
    port = free_port()
    argv = [sys.executable, str(REPO / "tests" / "integration" / "vllm_protocol_server.py")]
    argv += ["--port", str(port), "--model", str(gguf_path), "--model-name", MODEL]
    argv += ["--max-model-len", str(MAX_MODEL_LEN), *flags]
    server = ServerProcess(argv, port, "/health", name="vllm-protocol")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def vllm_server(gguf_path: Path) -> Iterator[ServerProcess]:
    """vLLM's API: `/v1/models` with `max_model_len`, `/tokenize` for chats."""
    yield from vllm_protocol_server(gguf_path)


@pytest.fixture(scope="module")
def bare_server(gguf_path: Path) -> Iterator[ServerProcess]:
    """An OpenAI-compatible server that reports no window and cannot tokenize (LM Studio-like)."""
    yield from vllm_protocol_server(gguf_path, "--bare", "--api-key", API_KEY)


async def _backend(spec: str, **options: object) -> AsyncIterator[OpenAIBackend]:
    backend = OpenAIBackend.from_spec(parse_spec(spec))
    for name, value in options.items():
        setattr(backend, name, value)
    try:
        yield backend
    finally:
        await backend.aclose()


class TestOpenAIOnVllmContract(BackendContract):
    expected_n_ctx = MAX_MODEL_LEN
    expected_counter_kind = "exact:tokenize"

    @pytest.fixture
    async def backend(self, vllm_server: ServerProcess) -> AsyncIterator[OpenAIBackend]:
        async for b in _backend(f"openai:{MODEL}@{vllm_server.url}"):
            yield b


class TestOpenAIOnLlamaServerContract(BackendContract):
    expected_n_ctx = SLOT
    expected_counter_kind = "exact:llama-server"

    @pytest.fixture
    async def backend(self, llama_server: ServerProcess) -> AsyncIterator[OpenAIBackend]:
        async for b in _backend(f"openai:gemma@{llama_server.url}"):
            yield b


def notes(n_tokens_hint: int) -> str:
    return "".join(NOTE.format(i=i) for i in range(n_tokens_hint // 25 + 1))


def notes_plan(n_ctx: int, output: int) -> ModelBudget:
    prompt = n_ctx - output
    return ModelBudget("notes", n_ctx, prompt, output, {"task": 64, "kb_chunks": prompt - 64})


def compose(sections: Mapping[str, str]) -> list[ChatMessage]:
    return [{"role": "user", "content": sections["kb_chunks"] + "\n" + sections["task"]}]


async def ask_notes(backend: OpenAIBackend, n_ctx: int, events: list) -> ModelCall:
    return await budgeted_call(
        CouncilContext(budgets={"notes": notes_plan(n_ctx, 16)}, temperature=0.0, usage_log=None),
        role="notes",
        agent="notes",
        backend=backend,
        contents=[text_section("task", QUESTION), text_section("kb_chunks", notes(3 * n_ctx))],
        compose=compose,
        question=QUESTION,
        on_event=events.append,
    )


async def test_vllm_window_and_exact_count_are_the_servers(vllm_server: ServerProcess) -> None:
    async for backend in _backend(f"openai:{MODEL}@{vllm_server.url}"):
        call = await ask_notes(backend, MAX_MODEL_LEN, [])
        assert call.report.n_ctx == MAX_MODEL_LEN and call.report.token_counter == "exact:tokenize"
        assert call.result.usage.prompt_tokens == call.report.prompt_tokens  # exact
        assert call.report.prompt_tokens + 16 <= MAX_MODEL_LEN
        assert call.report.prompt_tokens > MAX_MODEL_LEN - 16 - 64  # the window was used
        assert call.result.usage.completion_tokens <= call.report.max_output_tokens  # its cap


async def test_vllm_context_error_is_refitted_once_to_the_servers_numbers(
    vllm_server: ServerProcess,
) -> None:
    """A window the server no longer has (a restart with a smaller --max-model-len): vLLM's
    HTTP 400 text becomes ContextOverflow with its numbers, and one refit succeeds."""
    async for backend in _backend(f"openai:{MODEL}@{vllm_server.url}", precheck=False):

        async def stale_window() -> int:
            return 2 * MAX_MODEL_LEN

        backend.context_window = stale_window  # type: ignore[method-assign]
        events: list[dict] = []
        call = await ask_notes(backend, 2 * MAX_MODEL_LEN, events)
        windows = [e["report"]["n_ctx"] for e in events if e["type"] == "budget"]
        assert windows == [2 * MAX_MODEL_LEN, MAX_MODEL_LEN]
        assert call.overflow is not None and call.overflow.n_ctx == MAX_MODEL_LEN
        assert "maximum context length is 2048 tokens" in str(call.overflow)
        assert call.result.usage.prompt_tokens + call.report.max_output_tokens <= MAX_MODEL_LEN


async def test_vllm_overflow_numbers_are_the_servers(vllm_server: ServerProcess) -> None:
    async for backend in _backend(f"openai:{MODEL}@{vllm_server.url}", precheck=False):
        big: list[ChatMessage] = [{"role": "user", "content": notes(3000)}]
        counted = (await backend.token_counter()).count_messages(big)
        with pytest.raises(ContextOverflow) as info:
            await backend.chat(big, max_tokens=16)
        assert info.value.n_ctx == MAX_MODEL_LEN
        assert info.value.n_prompt_tokens == counted  # "your request has P input tokens"


async def test_a_server_without_window_or_tokenizer_is_refused_then_estimated(
    bare_server: ServerProcess, gguf_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async for backend in _backend(f"openai:{MODEL}@{bare_server.url}"):
        check = await backend.model_check()  # without $OPENAI_API_KEY: the server's 401
        assert not check.ok and "401" in check.detail
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    async for backend in _backend(f"openai:{MODEL}@{bare_server.url}"):
        check = await backend.model_check()
        assert not check.ok and "?n_ctx=" in check.detail  # preflight says what to set
        with pytest.raises(ConfigError, match=r"\?n_ctx="):
            await backend.context_window()
    spec = f"openai:{MODEL}@{bare_server.url}?n_ctx=1024&tokenizer=gguf:{gguf_path}"
    async for backend in _backend(spec):
        assert (await backend.model_check()).ok
        call = await ask_notes(backend, 1024, [])
        assert call.report.n_ctx == 1024
        # Never silently exact: the declared tokenizer is labelled, with its margin.
        assert call.report.token_counter == "estimated:gguf-vocab+10%"
        assert call.result.usage.prompt_tokens + 16 <= 1024  # the model's vocabulary + margin
        assert call.result.usage.completion_tokens <= call.report.max_output_tokens
        assert not call.result.warnings
    # Another model's vocabulary: gemma splits digits one by one, cl100k_base groups three, so
    # the server counts these notes beyond cl100k_base + 10% (1,090 vs 1,008 here): said loudly.
    spec = f"openai:{MODEL}@{bare_server.url}?n_ctx=1024&tokenizer=cl100k_base"
    async for backend in _backend(spec):
        call = await ask_notes(backend, 1024, [])
        assert call.report.token_counter == "estimated:tiktoken:cl100k_base+10%"
        assert call.result.usage.prompt_tokens > call.report.prompt_tokens
        assert any(w.startswith("COUNT UNDER ESTIMATE") for w in call.result.warnings)


async def test_openai_on_llama_server_refits_after_a_real_overflow(
    llama_server: ServerProcess,
) -> None:
    """The window from the real llama-server's slot; a stale, larger window gets the server's
    real HTTP 400 (exceed_context_size_error) and one refit to its n_ctx."""
    async for backend in _backend(f"openai:gemma@{llama_server.url}", precheck=False):
        assert await backend.context_window() == SLOT

        async def stale_window() -> int:
            return 2 * SLOT

        backend.context_window = stale_window  # type: ignore[method-assign]
        events: list[dict] = []
        call = await ask_notes(backend, 2 * SLOT, events)
        assert [e["report"]["n_ctx"] for e in events if e["type"] == "budget"][0] == 2 * SLOT
        assert call.overflow is not None and call.overflow.n_ctx == SLOT
        assert call.result.usage.prompt_tokens + call.report.max_output_tokens <= SLOT


async def test_openai_streams_from_the_real_llama_server(llama_server: ServerProcess) -> None:
    async for backend in _backend(f"openai:gemma@{llama_server.url}"):
        pieces = [d async for d in backend.stream(SHORT, max_tokens=12, temperature=0.0)]
        result = pieces[-1].result
        assert result is not None and len(pieces) > 2  # token by token, then the result
        assert "".join(p.text for p in pieces[:-1]) == result.text
        assert result.usage.prompt_tokens == await backend.count_prompt(SHORT)


@pytest.fixture(scope="module")
def tool_server(llama_server_binary: str, gguf_path: Path) -> Iterator[ServerProcess]:
    template = ("--jinja", "--chat-template-file", str(REPO / "tests/data/gemma-tools.jinja"))
    yield from serving_llama_server(
        llama_server_binary, gguf_path, "-c", "4096", "-np", "1", *template, name="tools-openai"
    )


async def test_openai_tools_on_the_real_llama_server(tool_server: ServerProcess, tmp_path):
    tools = VerificationTools(open_default_store(tmp_path / "kb.sqlite"), "lean")
    async for backend in _backend(f"openai:gemma@{tool_server.url}"):
        question = "Search the KB for PETG drying."
        call = await required_call(backend, tools.schemas[:1], question, 128, temperature=0.0)
        assert call.result.tool_calls and call.result.tool_calls[0].name == "kb_search"
        assert call.result.usage.prompt_tokens == call.report.prompt_tokens  # tools counted
        assert isinstance(call.result.tool_calls[0].arguments, dict)


async def test_openai_specs_share_backends_and_are_registered(
    vllm_server: ServerProcess,
) -> None:
    spec = f"openai:{MODEL}@{vllm_server.url}/"
    backend = backend_from_spec(spec)
    try:
        assert backend is backend_from_spec(spec.rstrip("/"))
        assert backend.spec == f"openai:{MODEL}@{vllm_server.url}"
        assert (await backend.health()).ok
    finally:
        await close_all()


async def test_a_model_the_server_does_not_list_fails_its_check(vllm_server: ServerProcess) -> None:
    async for backend in _backend(f"openai:no-such-model@{vllm_server.url}"):
        check = await backend.model_check()
        assert not check.ok
        assert check.detail == f"/v1/models does not list no-such-model (it has: {MODEL})"


async def test_confidence_where_the_server_returns_logprobs_and_a_note_where_not(
    llama_server: ServerProcess, vllm_server: ServerProcess
) -> None:
    async for backend in _backend(f"openai:gemma@{llama_server.url}"):
        result = await backend.chat(SHORT, max_tokens=12, temperature=0.0)
        assert result.confidence is not None and result.confidence.tokens > 0
        assert result.confidence.lowest <= result.confidence.mean <= 0.0
    async for backend in _backend(f"openai:{MODEL}@{vllm_server.url}"):
        # this protocol server ignores `logprobs`: nothing is made up
        result = await backend.chat(SHORT, max_tokens=12, temperature=0.0)
        assert result.usage.completion_tokens > 0
        assert result.confidence is None and result.confidence_note == NO_LOGPROBS
