"""Pure helpers of the Ollama backend: /api/show parsing, window choice, truncation checks."""

from __future__ import annotations

import sys

import pytest
from ollama import ChatResponse, Message

from collective.budget.counting import ChatMessage, EstimateCounter, tiktoken_counter
from collective.models.ollama_api import (
    DEFAULT_NUM_CTX_CAP,
    HARMONY_PREAMBLE_TOKENS,
    OLLAMA_DEFAULT_NUM_CTX,
    OllamaBackend,
    OllamaModelInfo,
    choose_num_ctx,
    parse_show,
    truncation_warning,
    usage_from_response,
)

SHOW = {
    "modelfile": "# Modelfile\nFROM /var/lib/ollama/blobs/sha256-abc\nPARAMETER num_ctx 131072\n",
    "parameters": 'num_ctx                        131072\nstop                           "<|end|>"',
    "model_info": {"general.architecture": "gptoss", "gptoss.context_length": 131072},
    "capabilities": ["completion", "tools", "thinking"],
}


def test_parse_show_reads_context_length_num_ctx_blob_and_capabilities() -> None:
    info = parse_show(SHOW)
    assert info.context_length == 131072
    assert info.modelfile_num_ctx == 131072
    assert info.blob == "/var/lib/ollama/blobs/sha256-abc"
    assert info.architecture == "gptoss"
    assert info.capabilities == ["completion", "tools", "thinking"]


def test_parse_show_without_num_ctx_or_model_info() -> None:
    info = parse_show({"parameters": 'stop "<end_of_turn>"', "modelfile": ""})
    assert info.context_length is None and info.modelfile_num_ctx is None and info.blob is None


@pytest.mark.parametrize(
    ("requested", "modelfile", "context_length", "expected"),
    [
        (8192, 131072, 131072, 8192),  # config wins
        (None, 131072, 131072, 131072),  # then the Modelfile
        (None, None, 131072, DEFAULT_NUM_CTX_CAP),  # then the model, capped
        (None, None, 8192, 8192),
        (None, None, None, OLLAMA_DEFAULT_NUM_CTX),  # nothing known: Ollama's default
        (200_000, None, 131072, 131072),  # never beyond the model's context
        (None, 65536, 32768, 32768),
    ],
)
def test_choose_num_ctx(
    requested: int | None, modelfile: int | None, context_length: int | None, expected: int
) -> None:
    assert (
        choose_num_ctx(
            requested=requested, modelfile_num_ctx=modelfile, context_length=context_length
        )
        == expected
    )


def test_usage_and_timings_from_ollama_counters() -> None:
    usage, timings = usage_from_response(
        {
            "prompt_eval_count": 100,
            "eval_count": 20,
            "prompt_eval_duration": 50_000_000,
            "eval_duration": 400_000_000,
            "total_duration": 500_000_000,
        }
    )
    assert (usage.prompt_tokens, usage.completion_tokens) == (100, 20)
    assert timings["predicted_per_second"] == pytest.approx(50.0)
    assert timings["prompt_per_second"] == pytest.approx(2000.0)
    assert timings["total_ms"] == pytest.approx(500.0)


def _warn(
    counted: int, reported: int | None, counter: object, *, exact_tpl: bool = False
) -> str | None:
    return truncation_warning(
        counted=counted,
        counter=counter,
        template_exact=exact_tpl,  # type: ignore[arg-type]
        prompt_eval_count=reported,
        num_ctx=4096,
        n_messages=3,
        model="m",
    )


def test_a_prompt_that_filled_the_window_was_truncated() -> None:
    warning = _warn(3000, 4096, EstimateCounter())
    assert warning is not None and "OLLAMA TRUNCATED THE PROMPT" in warning


def test_exact_counts_flag_dropped_tokens_beyond_template_noise() -> None:
    exact = tiktoken_counter("o200k_harmony")
    assert _warn(1000, 960, exact) is None  # within the unknown template's allowance
    assert _warn(1000, 900, exact) is not None
    assert _warn(1000, 999, exact, exact_tpl=True) is not None  # same template: any shortfall


def test_exact_content_is_the_floor_when_templates_differ() -> None:
    exact = tiktoken_counter("o200k_harmony")
    warn = lambda reported: truncation_warning(  # noqa: E731
        counted=1000,
        counter=exact,
        template_exact=False,
        prompt_eval_count=reported,
        num_ctx=4096,
        n_messages=3,
        model="m",
        content_tokens=900,
    )
    assert warn(895) is None  # a different, cheaper template; all content is there
    assert warn(850) is not None  # fewer tokens than the content alone


def test_estimates_flag_only_large_shortfalls() -> None:
    estimate = EstimateCounter()
    assert _warn(1000, 700, estimate) is None  # an estimate errs high on purpose
    assert _warn(1000, 100, estimate) is not None


def test_no_report_means_no_verdict() -> None:
    assert _warn(1000, None, EstimateCounter()) is None


def _backend(model: str) -> OllamaBackend:
    b = OllamaBackend(model, "http://127.0.0.1:1")
    # What /api/show would have said; discovery itself is tested against a real server.
    b._info = OllamaModelInfo(context_length=131072, modelfile_num_ctx=131072, architecture="")
    return b


async def test_gpt_oss_is_counted_with_o200k_harmony_plus_its_preamble() -> None:
    b = _backend("gpt-oss-120b-judge")
    counter = await b.token_counter()
    assert counter.kind == "tiktoken:o200k_harmony"
    messages: list[ChatMessage] = [{"role": "user", "content": "Which filament for a hot car?"}]
    assert (
        await b.count_prompt(messages) == counter.count_messages(messages) + HARMONY_PREAMBLE_TOKENS
    )
    assert await b.context_window() == 131072


async def test_the_reported_architecture_beats_the_name() -> None:
    b = _backend("gpt-oss-120b-judge")
    b._info = OllamaModelInfo(context_length=8192, modelfile_num_ctx=None, architecture="gemma3")
    assert not (await b.token_counter()).kind.startswith("tiktoken")
    c = _backend("judge")
    c._info = OllamaModelInfo(context_length=8192, modelfile_num_ctx=None, architecture="gptoss")
    assert (await c.token_counter()).kind == "tiktoken:o200k_harmony"


async def test_a_remote_model_without_vocabulary_gets_the_estimate() -> None:
    counter = await _backend("qwen2.5:72b").token_counter()
    assert counter.kind.startswith("estimate:") and not counter.exact


async def test_a_local_blob_without_llama_cpp_here_gets_the_estimate(tmp_path, monkeypatch) -> None:
    """An Agent Server's environment has no llama-cpp-python: Ollama on the same host must not
    fail the run (it was `ModuleNotFoundError: No module named 'llama_cpp'` in the planner)."""
    blob = tmp_path / "sha256-abc"
    blob.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # `import llama_cpp` raises ImportError
    b = _backend("gemma3:270m")
    b._info = OllamaModelInfo(
        context_length=8192, modelfile_num_ctx=None, architecture="gemma3", blob=str(blob)
    )
    counter = await b.token_counter()
    assert counter.kind.startswith("estimate:") and not counter.exact


def test_tool_calls_thinking_and_counts_are_mapped() -> None:
    b = _backend("gpt-oss-120b-judge")
    response = ChatResponse(
        model="gpt-oss-120b-judge",
        done=True,
        done_reason="stop",
        prompt_eval_count=150,
        eval_count=12,
        eval_duration=240_000_000,
        message=Message(
            role="assistant",
            content="",
            thinking="The user wants a lookup.",
            tool_calls=[
                Message.ToolCall(
                    function=Message.ToolCall.Function(name="kb_search", arguments={"q": "PETG"})
                )
            ],
        ),
    )
    result = b._result(response, 160, None, EstimateCounter(), 4096, [], 5.0)
    assert result.tool_calls[0].name == "kb_search"
    assert result.tool_calls[0].arguments == {"q": "PETG"}
    assert result.reasoning == "The user wants a lookup."
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (150, 12)
    assert result.timings["predicted_per_second"] == pytest.approx(50.0)
    assert result.finish_reason == "stop" and not result.warnings
