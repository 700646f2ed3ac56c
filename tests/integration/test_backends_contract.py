"""The contract every backend passes: one class, subclassed per backend.

A subclass provides a `backend` fixture and the facts the server should report
(`expected_n_ctx`, `expected_counter_kind`, `prompt_count_tolerance`).
"""

from __future__ import annotations

import json
from typing import ClassVar

import pytest

from collective.budget.counting import ChatMessage
from collective.errors import ContextOverflow
from collective.models.base import Backend

pytestmark = pytest.mark.integration

SHORT: list[ChatMessage] = [
    {"role": "system", "content": "You answer in one short sentence."},
    {"role": "user", "content": "What colour is the sky on a clear day?"},
]


class BackendContract:
    """Behaviour every backend must have. Subclasses set the class facts and `backend`."""

    expected_n_ctx: ClassVar[int]
    expected_counter_kind: ClassVar[str]
    prompt_count_slack_per_message: ClassVar[int] = 0
    """How far the server's prompt_tokens may differ from `count_prompt`, per message (0:
    exact, the same template rendered by the same tokenizer)."""

    async def test_context_window_is_the_servers(self, backend: Backend) -> None:
        assert await backend.context_window() == self.expected_n_ctx
        assert await backend.context_window() == self.expected_n_ctx  # stable when cached

    async def test_counter_is_the_models_own(self, backend: Backend) -> None:
        counter = await backend.token_counter()
        assert counter.kind == self.expected_counter_kind
        assert counter.exact
        text = "Polycarbonate keeps its shape at 120 °C; PLA softens near 60 °C. " * 20
        n = counter.count(text)
        assert 200 < n < len(text)
        head = counter.head(text, 25)
        assert text.startswith(head) and 0 < counter.count(head) <= 25
        tail = counter.tail(text, 25)
        assert text.endswith(tail) and 0 < counter.count(tail) <= 25

    async def test_chat_reports_usage_matching_our_count(self, backend: Backend) -> None:
        counted = await backend.count_prompt(SHORT)
        result = await backend.chat(SHORT, max_tokens=8, temperature=0.0)
        # what the model writes is its own (even nothing); that the cap holds, and is said
        # when reached, is the backend's
        assert isinstance(result.text, str) and 0 <= result.usage.completion_tokens <= 8
        assert result.finish_reason != "length" or result.usage.completion_tokens == 8
        slack = self.prompt_count_slack_per_message * len(SHORT)
        assert abs(result.usage.prompt_tokens - counted) <= slack
        assert not result.warnings
        assert result.timings["wall_ms"] > 0
        assert result.finish_reason in ("stop", "length")

    async def test_overflow_is_refused_with_numbers(self, backend: Backend) -> None:
        n_ctx = await backend.context_window()
        counter = await backend.token_counter()
        big = "The quick brown fox jumps over the lazy dog. " * (n_ctx // 4)
        assert counter.count(big) > n_ctx
        with pytest.raises(ContextOverflow) as info:
            await backend.chat([{"role": "user", "content": big}], max_tokens=16)
        assert info.value.n_ctx == n_ctx
        assert info.value.n_prompt_tokens + 16 > n_ctx
        assert f"n_ctx={n_ctx}" in str(info.value)

    async def test_output_reservation_counts_toward_the_window(self, backend: Backend) -> None:
        n_ctx = await backend.context_window()
        counted = await backend.count_prompt(SHORT)
        with pytest.raises(ContextOverflow):
            await backend.chat(SHORT, max_tokens=n_ctx - counted + 1)

    async def test_json_schema_constrains_output(self, backend: Backend) -> None:
        if not backend.supports_json_schema:
            pytest.skip(f"{backend.spec} does not claim JSON schema support")
        schema = {
            "type": "object",
            "properties": {"colour": {"type": "string", "enum": ["blue", "green", "red"]}},
            "required": ["colour"],
            "additionalProperties": False,
        }
        # Room for the longest answer the grammar allows (llama-server's allows 22 bytes of
        # whitespace after each of its 5 tokens), so it always closes, whatever is written.
        result = await backend.chat(SHORT, max_tokens=160, temperature=0.0, json_schema=schema)
        assert json.loads(result.text)["colour"] in ("blue", "green", "red")

    async def test_health_is_ok(self, backend: Backend) -> None:
        health = await backend.health()
        assert health.ok, health.detail
