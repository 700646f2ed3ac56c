"""Pure helpers of the Ollama backend: /api/show parsing, window choice, truncation checks."""

from __future__ import annotations

import pytest

from collective.budget.counting import EstimateCounter, tiktoken_counter
from collective.models.ollama_api import (
    DEFAULT_NUM_CTX_CAP,
    OLLAMA_DEFAULT_NUM_CTX,
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
