"""The in-process llama.cpp backend with the embedded gemma model."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import need_llama_cpp, required_call
from test_backends_contract import SHORT, BackendContract

from collective.errors import ConfigError
from collective.models import registry
from collective.models.base import ChatMessage
from collective.models.llamacpp_in_process import (
    EMBEDDED_N_CTX,
    LlamaCppBackend,
    gguf_vocab_counter,
)

pytestmark = pytest.mark.integration

N_CTX = 2048


@pytest.fixture(scope="module")
def shared_backend(gguf_path: Path) -> LlamaCppBackend:
    need_llama_cpp()
    return LlamaCppBackend(gguf_path, n_ctx=N_CTX)


@pytest.fixture
async def backend(shared_backend: LlamaCppBackend) -> AsyncIterator[LlamaCppBackend]:
    yield shared_backend  # one load for the module; each test's loop may call it


class TestLlamaCppContract(BackendContract):
    expected_n_ctx = N_CTX
    expected_counter_kind = "exact:llama.cpp"


def test_nothing_loads_until_used(gguf_path: Path) -> None:
    b = LlamaCppBackend(gguf_path, n_ctx=N_CTX)
    assert not b.loaded


async def test_concurrent_chats_are_serialised_and_all_answered(
    shared_backend: LlamaCppBackend,
) -> None:
    results = await asyncio.gather(
        *(shared_backend.chat(SHORT, max_tokens=6, temperature=0.0) for _ in range(3))
    )
    counted = await shared_backend.count_prompt(SHORT)
    assert all(r.usage.prompt_tokens == counted for r in results)
    assert all(0 < r.usage.completion_tokens <= 6 for r in results)


async def test_tools_are_refused_honestly(shared_backend: LlamaCppBackend) -> None:
    assert not shared_backend.supports_tools
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    with pytest.raises(ConfigError, match="has no tool calling"):
        await shared_backend.chat(SHORT, max_tokens=4, tools=[tool])


async def test_the_template_is_the_one_llama_server_uses(shared_backend: LlamaCppBackend) -> None:
    # This GGUF carries no chat template, so llama.cpp (and llama-server) fall back to ChatML;
    # the vocabulary adds BOS itself.
    counter = await shared_backend.token_counter()
    prompt, stop = counter.chat.render(SHORT)
    assert prompt == (
        "<|im_start|>system\nYou answer in one short sentence.<|im_end|>\n"
        "<|im_start|>user\nWhat colour is the sky on a clear day?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert "<|im_end|>" in stop
    ids, _ = counter.chat.prompt_tokens(SHORT)
    assert ids[0] == counter.chat.model.token_bos()
    assert (
        counter.count_messages(SHORT) == len(ids) > sum(counter.count(m["content"]) for m in SHORT)
    )


def test_vocab_only_counter_counts_like_the_loaded_model(
    gguf_path: Path, shared_backend: LlamaCppBackend
) -> None:
    vocab = gguf_vocab_counter(str(gguf_path))
    assert vocab.kind == "exact:gguf-vocab"
    loaded = asyncio.run(shared_backend.token_counter())
    text = "Nylon absorbs moisture; dry it at 70 °C before printing. 東京 ✓"
    assert vocab.count(text) == loaded.count(text)
    assert vocab.count_messages(SHORT) == loaded.count_messages(SHORT)


async def test_registry_shares_one_backend_for_the_embedded_model(gguf_path: Path) -> None:
    try:
        a = registry.backend_from_spec("embedded")
        b = registry.backend_from_spec("embedded")
        c = registry.backend_from_spec(f"llamacpp:{a.path}")  # type: ignore[attr-defined]
        assert a is b is c
        assert isinstance(a, LlamaCppBackend) and not a.loaded
        assert a.model == "gemma-3-270m-q4_k_m"
        assert await a.context_window() == EMBEDDED_N_CTX
    finally:
        await registry.close_all()


async def test_two_backends_on_one_file_share_its_model_and_outlive_each_other(
    gguf_path: Path,
) -> None:
    # One loaded model per file and repacking, a context each: closing one backend must not
    # free the model under the other.
    from collective.models.llamacpp_in_process import model_holders

    held = model_holders(gguf_path)  # other tests' backends in this process may hold it
    first = LlamaCppBackend(gguf_path, n_ctx=N_CTX)
    second = LlamaCppBackend(gguf_path, n_ctx=N_CTX)
    try:
        answers = [await b.chat(SHORT, max_tokens=4, temperature=0.0) for b in (first, second)]
        assert first.engine.model is second.engine.model
        assert first.engine is not second.engine
        assert model_holders(gguf_path) == held + 2
        await first.aclose()
        assert model_holders(gguf_path) == held + 1
        again = await second.chat(SHORT, max_tokens=4, temperature=0.0)
        assert again.text == answers[1].text and again.usage.completion_tokens > 0
    finally:
        await first.aclose()
        await second.aclose()
    assert model_holders(gguf_path) == held
    assert not first.loaded and not second.loaded


def _greedy(backend: LlamaCppBackend, penalty: float) -> tuple[int, ...]:
    """The token ids `backend` generates greedily for a prompt asking to repeat, on a fresh
    context (a prompt read whole every time, so both runs see the same logits)."""
    from collective.models.batch_engine import GenerationRequest

    loop: list[ChatMessage] = [
        {"role": "user", "content": "Write the word 'red' again and again: red red red red red"}
    ]
    chat = backend._load_sync()
    ids, _ = chat.prompt_tokens(loop)
    out = backend.engine.generate(
        GenerationRequest(ids, 32, temperature=0.0, repeat_penalty=penalty)
    )
    return out.tokens


def test_the_repeat_penalty_reaches_the_sampler(gguf_path: Path) -> None:
    # What the sampler guarantees, whatever the model writes: a penalty only lowers the logits
    # of tokens already generated, so a greedy run keeps the plain run's tokens up to the first
    # one the plain run repeats; and an overwhelming penalty leaves every generated token
    # below any unseen token with a positive logit, so none comes twice.
    need_llama_cpp()
    plain_backend = LlamaCppBackend(gguf_path, n_ctx=N_CTX)
    penalised_backend = LlamaCppBackend(gguf_path, n_ctx=N_CTX)
    try:
        plain = _greedy(plain_backend, 1.0)
        penalised = _greedy(penalised_backend, 1e6)
    finally:
        asyncio.run(plain_backend.aclose())
        asyncio.run(penalised_backend.aclose())
    assert penalised and plain
    assert len(set(penalised)) == len(penalised), penalised
    first_repeat = next((i for i, t in enumerate(plain) if t in plain[:i]), len(plain))
    assert penalised[:first_repeat] == plain[:first_repeat], (plain, penalised)
    if first_repeat < len(plain):  # the plain run repeated a token: the penalised one did not
        assert penalised != plain


HERMES_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}"
    "{% if loop.first and tools %}\nTools: {{ tools | tojson }}. Call one as "
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call>{% endif %}<end_of_turn>\n'
    "{% endfor %}<start_of_turn>model\n"
)


@pytest.mark.parametrize("cap", [96, 256])
async def test_a_required_tool_call_is_kept_in_process(gguf_path: Path, cap: int) -> None:
    # The base gemma model left to itself writes prose; a required call through the seam is
    # held to the tools' bounded schemas by a grammar, so whatever the model writes (on any
    # CPU's numerics) the call closes within the cap: it parses, names an offered tool, and
    # its one argument is a string no longer than the schema sent allows.
    from collective.kb.tools import VerificationTools
    from collective.models.tool_calls import tool_call_schema
    from tests.fakes import ListStore

    backend = LlamaCppBackend(gguf_path, n_ctx=N_CTX, chat_template=HERMES_TEMPLATE)
    schemas = VerificationTools(ListStore([]), "lean").schemas
    try:
        call = await required_call(backend, schemas, "Which filament survives heat?", cap)
        prefix = len(backend._load_sync().model.tokenize(b"<tool_call>\n", False, True))
    finally:
        await backend.aclose()
    assert call.result.finish_reason == "tool_calls" and len(call.result.tool_calls) == 1
    assert call.result.usage.completion_tokens <= cap
    tool_call = call.result.tool_calls[0]
    held = {  # the bounds the grammar was built from: the cap less the opened `<tool_call>`
        c["properties"]["name"]["const"]: c["properties"]["arguments"]
        for c in tool_call_schema(schemas, cap - prefix)["anyOf"]
    }
    assert tool_call.name in held
    ((arg, bound),) = held[tool_call.name]["properties"].items()
    assert set(tool_call.arguments) == {arg}
    value = tool_call.arguments[arg]
    assert isinstance(value, str) and len(value) <= bound["maxLength"]


async def test_a_required_tool_call_too_big_for_its_cap_says_so_and_names_the_cap(
    gguf_path: Path,
) -> None:
    # A cap that cannot hold the shortest call is refused before the model writes anything,
    # with the cap and the setting to raise named (not as an unparseable call).
    from collective.errors import ToolCallCut
    from collective.kb.tools import VerificationTools
    from tests.fakes import ListStore

    backend = LlamaCppBackend(gguf_path, n_ctx=N_CTX, chat_template=HERMES_TEMPLATE)
    schemas = VerificationTools(ListStore([]), "lean").schemas
    try:
        with pytest.raises(ToolCallCut) as cut:
            await required_call(backend, schemas, "Which filament survives heat?", 24)
    finally:
        await backend.aclose()
    message = str(cut.value)
    assert "cannot hold a call to" in message and "raise output_caps.judge" in message
    assert "unparseable" not in message


async def test_a_call_refusing_tools_reads_on_from_the_prompt_that_offered_them(
    gguf_path: Path,
) -> None:
    # The judge's fix call continues its draft's prompt (tools offered) with tool_choice="none":
    # the template must still render the tools, else the prompt differs from the system turn on
    # and the KV holding the draft's prompt is not reused (measured: 133 of 6,013 tokens).
    from collective.kb.tools import VerificationTools
    from tests.fakes import ListStore

    backend = LlamaCppBackend(gguf_path, n_ctx=N_CTX, chat_template=HERMES_TEMPLATE)
    schemas = VerificationTools(ListStore([]), "lean").schemas
    asked: list[ChatMessage] = [
        {"role": "user", "content": "Which filament survives a hot car? Answer in one line."}
    ]
    try:
        draft = await backend.chat(asked, max_tokens=16, temperature=0.0, tools=schemas)
        follow: list[ChatMessage] = [
            *asked,
            {"role": "assistant", "content": draft.text},
            {"role": "user", "content": "Say it again, shorter, with no tool call."},
        ]
        fix = await backend.chat(
            follow, max_tokens=16, temperature=0.0, tools=schemas, tool_choice="none"
        )
    finally:
        await backend.aclose()
    assert not fix.tool_calls
    assert fix.usage.cached_tokens is not None
    assert fix.usage.cached_tokens >= draft.usage.prompt_tokens - 1  # the draft's whole prompt


async def test_confidence_is_read_from_the_models_own_logits(
    shared_backend: LlamaCppBackend,
) -> None:
    result = await shared_backend.chat(SHORT, max_tokens=24, temperature=0.7, seed=7)
    got = result.confidence
    assert got is not None and result.confidence_note is None
    assert got.tokens == result.usage.completion_tokens > 0
    assert math.isfinite(got.mean) and got.mean <= 0.0
    assert got.lowest <= got.mean


def test_each_tokens_log_probability_is_llamas_own(
    gguf_path: Path, shared_backend: LlamaCppBackend
) -> None:
    """The engine's log-probabilities equal llama-cpp-python's `Llama` (`logprobs`), greedy."""
    from llama_cpp import Llama

    from collective.models.batch_engine import GenerationRequest

    ids, _ = asyncio.run(shared_backend.token_counter()).chat.prompt_tokens(SHORT)
    out = shared_backend.engine.generate(GenerationRequest(ids, 12, temperature=0.0))
    assert len(out.logprobs) == out.completion_tokens > 0
    llama = Llama(str(gguf_path), n_ctx=512, logits_all=True, verbose=False)
    try:
        reference = llama.create_completion(ids, max_tokens=12, temperature=0.0, logprobs=1)
    finally:
        llama.close()
    theirs = reference["choices"][0]["logprobs"]["token_logprobs"]  # type: ignore[index]
    n = min(len(theirs), len(out.logprobs))
    assert n >= 3
    # batch shapes and weight repacking move the logits a little (up to 0.06 seen); a wrong
    # row, a missing normalisation or a tempered distribution would be off by far more
    assert out.logprobs[:n] == pytest.approx(theirs[:n], abs=0.1)
    assert sum(out.logprobs[:n]) / n == pytest.approx(sum(theirs[:n]) / n, abs=0.03)
