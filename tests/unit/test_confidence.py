"""Confidence from token log-probabilities: the one helper, and the OpenAI-shaped replies."""

from __future__ import annotations

import json
import math

import pytest

from collective.models.confidence import (
    Confidence,
    confidence_fields,
    is_confident,
    token_confidence,
)
from collective.models.openai_compat import (
    NO_LOGPROBS,
    StreamedReply,
    parse_chat_response,
)


def test_mean_and_lowest_window() -> None:
    values = [-0.1] * 20 + [-3.0] * 4 + [-0.1] * 20
    got = token_confidence(values, window=4)
    assert got is not None
    assert got.tokens == 44
    assert got.mean == pytest.approx(sum(values) / 44)
    assert got.lowest == pytest.approx(-3.0)  # the four unsure tokens are one window
    assert got.lowest <= got.mean


def test_a_short_answer_is_one_window() -> None:
    got = token_confidence([-0.5, -1.5], window=12)
    assert got == Confidence(mean=-1.0, lowest=-1.0, tokens=2, window=12)


def test_lowest_is_never_above_the_mean() -> None:
    # Sliding windows can all average above the whole: the unsure tokens sit at both ends.
    got = token_confidence([-1.0, 0.0, 0.0, -1.0], window=3)
    assert got is not None
    assert got.mean == pytest.approx(-0.5)
    assert got.lowest == pytest.approx(-0.5)


def test_non_numbers_are_left_out_and_none_without_any() -> None:
    got = token_confidence([None, float("nan"), -0.2, True, float("-inf"), 1e-9])  # type: ignore[list-item]
    assert got is not None and got.tokens == 2
    assert got.mean == pytest.approx(-0.1)  # a rounding above 0 counts as 0
    assert token_confidence([]) is None
    assert token_confidence([None, float("nan")]) is None


def test_fields_say_why_there_is_none() -> None:
    assert confidence_fields(None, "no logprobs here") == {
        "confidence": None,
        "confidence_note": "no logprobs here",
    }
    assert confidence_fields(None, None)["confidence_note"]  # never silent
    sure = token_confidence([-0.01] * 30)
    fields = confidence_fields(sure, "ignored")
    assert set(fields) == {"confidence"}
    assert is_confident(fields, -0.5)
    assert not is_confident(fields, -0.001)
    assert not is_confident(confidence_fields(None, None), -100.0)  # unknown: never sure
    assert not is_confident(None, -100.0)


def _entries(values: list[float]) -> list[dict]:
    return [{"token": "x", "logprob": v, "bytes": [120], "top_logprobs": []} for v in values]


def test_a_completion_body_with_logprobs() -> None:
    body = {
        "choices": [
            {
                "message": {"content": "Yes."},
                "finish_reason": "stop",
                "logprobs": {"content": _entries([-0.5, -0.25])},
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }
    result = parse_chat_response(body, url="http://127.0.0.1:1", wall_ms=1.0)
    assert result.confidence is not None
    assert result.confidence.mean == pytest.approx(-0.375)
    assert result.confidence_note is None
    del body["choices"][0]["logprobs"]
    bare = parse_chat_response(body, url="http://127.0.0.1:1", wall_ms=1.0)
    assert bare.confidence is None and bare.confidence_note == NO_LOGPROBS


def test_a_stream_gathers_each_completions_logprobs() -> None:
    reply = StreamedReply("http://127.0.0.1:1")
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "A"},
                      "logprobs": {"content": _entries([-0.1])}}]},
        {"choices": [{"index": 1, "delta": {"content": "B"},
                      "logprobs": {"content": _entries([-2.0])}}]},
        {"choices": [{"index": 0, "delta": {"content": "a"},
                      "logprobs": {"content": _entries([-0.3])}, "finish_reason": "stop"}]},
        {"choices": [{"index": 1, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
    ]  # fmt: skip
    for chunk in chunks:
        reply.feed(json.dumps(chunk))
    usage = {"prompt_tokens": 3, "completion_tokens": 2}
    first = parse_chat_response({**reply.body(), "usage": usage}, url="u", wall_ms=1.0)
    other = parse_chat_response({**reply.sample_bodies()[0], "usage": usage}, url="u", wall_ms=1)
    assert first.text == "Aa" and first.confidence is not None
    assert first.confidence.tokens == 2 and math.isclose(first.confidence.mean, -0.2)
    assert other.text == "B" and other.confidence is not None
    assert other.confidence.mean == pytest.approx(-2.0)


def test_logprobs_are_asked_except_beside_tools() -> None:
    from collective.models.llama_server import LlamaServerBackend

    backend = LlamaServerBackend("http://127.0.0.1:9")  # nothing is sent
    messages = [{"role": "user", "content": "hi"}]
    options = {"max_tokens": 4, "temperature": 0.0, "stop": None, "json_schema": None,
               "tool_choice": None}  # fmt: skip
    plain = backend._chat_request(messages, None, **options)  # type: ignore[arg-type]
    assert plain["logprobs"] is True and plain["top_logprobs"] == 1
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    # llama-server refuses logprobs with tools in a stream ("not supported with tools + stream")
    with_tools = backend._chat_request(messages, [tool], **options)  # type: ignore[arg-type]
    assert "logprobs" not in with_tools and "top_logprobs" not in with_tools
