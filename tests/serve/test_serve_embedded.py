"""`collective serve` on the embedded test model (in process), driven by the `openai` client.

Real models end to end: the council's own defaults (every role `embedded`, the small model
tests run: tests/conftest.py) over real HTTP on 127.0.0.1. What a model writes is not asserted;
what the server guarantees of it is: the verdict's tags are its citations, the streamed text is
the checked one, usage counts the calls.
"""

from __future__ import annotations

import re

import openai
import pytest

from tests.serve.servers import Process

pytestmark = pytest.mark.integration

QUESTION = "Which filament should I use for a part that sits in a hot car, and why?"


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    directory = tmp_path_factory.mktemp("embedded")
    process = Process(["serve", "--port", "0"], directory).wait_ready()
    yield process
    assert process.stop() == 0, "".join(process.lines)


def _tags(text: str) -> set[str]:
    return set(re.findall(r"\[KB#([\w.:-]+)\]", text))


def test_streamed_and_whole_answers_on_the_embedded_model(serve):
    client = openai.OpenAI(base_url=f"{serve.url}/v1", api_key="-", max_retries=0, timeout=600)
    whole = client.chat.completions.create(
        model="collective", messages=[{"role": "user", "content": QUESTION}], user="embedded"
    )
    ext = whole.model_extra["collective"]
    content = whole.choices[0].message.content
    assert _tags(content) == {c["id"] for c in ext["citations"]}
    assert whole.usage.prompt_tokens > 0 and whole.usage.completion_tokens > 0
    stream = client.chat.completions.create(
        model="collective",
        messages=[{"role": "user", "content": "And for a part in a garden?"}],
        user="embedded",
        stream=True,
    )
    chunks = list(stream)
    progress = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    assert "specialist-1: done" in progress and "specialist-2: done" in progress
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    claims = final.model_extra["collective"]["claims"]
    assert _tags(streamed) == {c["id"] for c in final.model_extra["collective"]["citations"]}
    for claim in claims:
        if claim["status"] == "dropped":
            assert claim["text"] not in streamed
    assert final.usage.completion_tokens > 0
