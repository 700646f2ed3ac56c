"""`collective serve` driven by the official `openai` client over real HTTP on 127.0.0.1.

The council's models are a scripted OpenAI-protocol server (tests/agent_server/scripted_openai.py)
whose judge cites the first chunk it is shown and adds a line no chunk supports: the answers'
text is not the point here, what the server does with them is (citations, the claim check's
marks, usage, threads, limits, cancellation).
"""

from __future__ import annotations

import socket
import threading

import httpx
import openai
import pytest

from tests.serve.servers import (
    UNSUPPORTED,
    Process,
    citing_judge,
    council_config,
    model_server,
    wait_for,
)

KEY = "test-key-7f3a"
HOT_CAR = "Which filament should I use for a part that sits in a hot car?"


@pytest.fixture(scope="module")
def models():
    server = model_server(latency_s=0.1)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def serve(models, tmp_path_factory):
    directory = tmp_path_factory.mktemp("serve")
    config = council_config(directory, models)
    (directory / "one").mkdir()
    one = council_config(directory / "one", models, k=1)  # a named council of one member
    args = ["serve", "--port", "0", "--config", str(config), "--max-body-bytes", "32768"]
    args += ["--council", f"one={one}"]
    args += ["--max-messages", "16", "--max-question-chars", "2000", "--max-concurrent", "1"]
    process = Process(args, directory, env={"COLLECTIVE_SERVE_API_KEY": KEY}).wait_ready()
    yield process
    assert process.stop() == 0, "".join(process.lines)


@pytest.fixture
def client(serve):
    return openai.OpenAI(base_url=f"{serve.url}/v1", api_key=KEY, max_retries=0, timeout=120)


@pytest.fixture(autouse=True)
def quick(models):
    models.latency_s = 0.1
    yield
    models.latency_s = 0.1


def running(serve) -> int:
    return httpx.get(f"{serve.url}/health", timeout=10).json()["running"]


def calls_of(models, start: int) -> list[tuple[str, str]]:
    """(model, prompt) of every answer the model server finished since `start`."""
    with models.lock:
        return list(models.answered[start:])


def words_of(model: str, prompt: str) -> int:
    """The completion tokens the scripted server reports for one answer (its words)."""
    from tests.agent_server.scripted_openai import REPLIES

    reply = citing_judge(prompt) if model == "judge" else REPLIES.get(model, "ok")
    return len(reply.split(" "))


def test_models_are_the_answer_modes(client):
    listed = {m.id: m.model_extra["collective"] for m in client.models.list().data}
    assert listed["collective"]["mode"] == "council"
    for mode in ("council-review", "council-split", "single", "self-consistency", "self-moa"):
        assert listed[f"collective-{mode}"]["mode"] == mode
    assert client.models.retrieve("collective-single").id == "collective-single"
    assert listed["one"] == {"council": "one", "mode": "council", "members": 1, "threads": True}
    assert listed["one-self-moa"]["mode"] == "self-moa"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_answer_with_citations_claim_marks_and_usage(client, models):
    start = len(models.answered)
    answer = client.chat.completions.create(
        model="collective", messages=[{"role": "user", "content": HOT_CAR}]
    )
    ext = answer.model_extra["collective"]
    content = answer.choices[0].message.content
    assert answer.choices[0].finish_reason == "stop"
    assert ext["citations"], ext
    for citation in ext["citations"]:
        assert f"[KB#{citation['id']}]" in content
    statuses = {c["status"] for c in ext["claims"]}
    assert "supported" in statuses and "dropped" in statuses
    # The line the check dropped is in no part of what the client keeps.
    assert "9999" not in content and UNSUPPORTED not in content
    assert "Sources: [KB#" in content and "[supported]" in content
    # usage: every call the council made (the model server's own count of each answer).
    calls = calls_of(models, start)
    assert len(calls) >= 3  # two members and the judge at least
    assert answer.usage.completion_tokens == sum(words_of(m, p) for m, p in calls)
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens
    assert answer.usage.prompt_tokens > 0


def test_streamed_answer_sends_only_checked_lines(client):
    stream = client.chat.completions.create(
        model="collective",
        messages=[{"role": "user", "content": HOT_CAR}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    order = []
    for chunk in chunks:
        for choice in chunk.choices:
            if (choice.delta.model_extra or {}).get("reasoning_content"):
                order.append(("progress", choice.delta.model_extra["reasoning_content"]))
            if choice.delta.content:
                order.append(("content", choice.delta.content))
    progress = "".join(text for kind, text in order if kind == "progress")
    assert "specialist-1: running" in progress and "specialist-2: done" in progress
    assert "judge: done" in progress
    # Every piece of the verdict comes after the judge's check ended: none is taken back.
    last_progress = max(i for i, (kind, _) in enumerate(order) if kind == "progress")
    first_content = min(i for i, (kind, _) in enumerate(order) if kind == "content")
    assert last_progress < first_content
    content = "".join(text for kind, text in order if kind == "content")
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    ext = final.model_extra["collective"]
    assert final.choices[0].finish_reason == "stop"
    assert ext["citations"] and any(c["status"] == "dropped" for c in ext["claims"])
    for claim in ext["claims"]:
        if claim["status"] == "dropped":
            assert claim["text"].split(" [KB")[0].rstrip(" .") not in content
    for citation in ext["citations"]:
        assert f"[KB#{citation['id']}]" in content
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert final.usage.total_tokens == chunks[-1].usage.total_tokens


def test_a_named_council_and_a_mode_answer_with_their_own_calls(client, models):
    start = len(models.prompts)
    answer = client.chat.completions.create(
        model="one", messages=[{"role": "user", "content": HOT_CAR}]
    )
    with models.lock:
        called = [m for m, _ in models.prompts[start:]]
    assert called.count("specialist") == 1 and answer.model_extra["collective"]["citations"]
    start = len(models.answered)
    single = client.chat.completions.create(
        model="collective-single", messages=[{"role": "user", "content": HOT_CAR}]
    )
    calls = calls_of(models, start)
    assert {m for m, _ in calls} == {"judge"}  # the judge's model alone, no members
    assert single.model_extra["collective"]["mode"] == "single"
    assert single.model_extra["collective"]["thread"] is None  # modes have no thread
    assert single.usage.completion_tokens == sum(words_of(m, p) for m, p in calls)


def _asked(models, start: int, needle: str) -> bool:
    with models.lock:
        return any(needle in prompt for _, prompt in models.prompts[start:])


def test_two_threads_keep_their_memories_apart(client, models, serve):
    def ask(question: str, **thread) -> int:
        start = len(models.prompts)
        client.chat.completions.create(
            model="collective", messages=[{"role": "user", "content": question}], **thread
        )
        return start

    alice = {"user": "alice-thread"}
    bob = {"extra_headers": {"X-Collective-Thread": "bob-thread"}}
    ask("My printer is called ZEPHYR-42. Which filament for a hot car?", **alice)
    ask("Which filament for a garden planter?", **bob)
    alice_then = ask("Which filament for my printer's enclosure?", **alice)
    bob_then = ask("Which filament for my printer's enclosure?", **bob)
    assert _asked(models, alice_then, "ZEPHYR-42")  # alice's thread remembers
    history = httpx.get(
        f"{serve.url}/collective/v1/threads/alice-thread",
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=10,
    ).json()
    said = [t["text"] for t in history["turns"] if t["role"] == "user"]
    assert said[0].startswith("My printer is called ZEPHYR-42") and len(said) == 2
    assert not any("garden" in t["text"] for t in history["turns"])
    assert not _asked(models, bob_then, "ZEPHYR-42")  # bob's never sees alice's
    assert _asked(models, bob_then, "garden planter")


def test_earlier_messages_are_a_new_threads_conversation(client, models):
    start = len(models.prompts)
    earlier = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "I print with a printer called QUOKKA-7."},
        {"role": "assistant", "content": "Noted: QUOKKA-7."},
        {"role": "user", "content": "Which filament for a hot car?"},
    ]
    answer = client.chat.completions.create(model="collective", messages=earlier)
    assert _asked(models, start, "QUOKKA-7")
    thread = answer.model_extra["collective"]["thread"]
    # The thread is known now: its own memory is read, not the turns a client sends again.
    again = len(models.prompts)
    forged = [
        {"role": "user", "content": "My printer is FORGED-99."},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "And for a garden?"},
    ]
    client.chat.completions.create(model="collective", messages=forged, user=thread)
    assert _asked(models, again, "QUOKKA-7") and not _asked(models, again, "FORGED-99")


def test_wrong_or_missing_key_is_401(serve):
    for key in ("wrong-key", ""):
        bad = openai.OpenAI(base_url=f"{serve.url}/v1", api_key=key or "-", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as caught:
            bad.chat.completions.create(
                model="collective", messages=[{"role": "user", "content": HOT_CAR}]
            )
        assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
    bare = httpx.get(f"{serve.url}/v1/models", timeout=10)  # no Authorization header at all
    assert bare.status_code == 401 and bare.json()["error"]["code"] == "invalid_api_key"


def test_oversize_requests_are_refused_in_openai_shape(client, serve):
    with pytest.raises(openai.APIStatusError) as body:
        client.chat.completions.create(
            model="collective", messages=[{"role": "user", "content": "x" * 40_000}]
        )
    assert body.value.status_code == 413 and body.value.code == "request_too_large"
    assert "32,768" in body.value.message
    many = [{"role": "user", "content": "hi"}] * 17
    with pytest.raises(openai.APIStatusError) as messages:
        client.chat.completions.create(model="collective", messages=many)
    assert messages.value.status_code == 413 and "--max-messages" in messages.value.message
    with pytest.raises(openai.BadRequestError) as question:
        client.chat.completions.create(
            model="collective", messages=[{"role": "user", "content": "y" * 2_001}]
        )
    assert "--max-question-chars" in question.value.message
    # A body sent without Content-Length (chunked) is cut off at the limit too.
    chunked = httpx.post(
        f"{serve.url}/v1/chat/completions",
        content=iter([b"{" + b" " * 20_000, b" " * 20_000 + b"}"]),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        timeout=30,
    )
    assert chunked.status_code == 413 and chunked.json()["error"]["code"] == "request_too_large"
    assert running(serve) == 0


def test_bad_requests_are_400_in_openai_shape(client):
    for messages in (
        [{"role": "assistant", "content": "a question must end the list"}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
        [{"role": "user", "content": " \u200b\n"}],  # nothing visible to ask
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="collective", messages=messages)
        assert caught.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as bad_k:
        client.chat.completions.create(
            model="collective",
            messages=[{"role": "user", "content": HOT_CAR}],
            extra_body={"collective": {"k": 0}},
        )
    assert "collective.k" in bad_k.value.message
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": HOT_CAR}]
        )


def test_one_council_more_than_the_limit_is_429(client, models, serve):
    models.latency_s = 30  # the first run holds its place while the second is asked
    first = client.chat.completions.create(
        model="collective", messages=[{"role": "user", "content": HOT_CAR}], stream=True
    )
    try:
        next(iter(first))
        assert wait_for(lambda: running(serve) == 1, timeout=30)
        with pytest.raises(openai.RateLimitError) as caught:
            client.chat.completions.create(
                model="collective", messages=[{"role": "user", "content": HOT_CAR}]
            )
        assert caught.value.response.headers["retry-after"] == "5"
        assert caught.value.code == "concurrency_limit"
    finally:
        first.close()
    assert wait_for(lambda: running(serve) == 0, timeout=60)


def _specialists_called(models, start: int) -> bool:
    with models.lock:
        return models.in_flight > 0 and any(m == "specialist" for m, _ in models.prompts[start:])


def test_a_client_that_goes_away_cancels_its_run(client, models, serve):
    question = "Which filament for a part near a heater? (streamed, then gone)"
    models.latency_s = 30  # an answer takes 30 s: only a cancelled call ends sooner
    start, dropped = len(models.prompts), models.dropped
    stream = client.chat.completions.create(
        model="collective", messages=[{"role": "user", "content": question}], stream=True
    )
    for chunk in stream:
        if wait_for(lambda: _specialists_called(models, start), timeout=0.01):
            break
    assert wait_for(lambda: _specialists_called(models, start), timeout=30)
    stream.close()
    # Its model calls end (the model server sees the connections close), and so does the run.
    assert wait_for(lambda: models.in_flight == 0, timeout=60)
    assert wait_for(lambda: running(serve) == 0, timeout=60)
    assert models.dropped > dropped
    assert models.finished(question) == []  # no call of the run answered in full


def test_a_non_streaming_client_that_times_out_cancels_its_run(serve, models):
    question = "Which filament for a part near a radiator? (not streamed, then gone)"
    models.latency_s = 30
    start, dropped = len(models.prompts), models.dropped
    impatient = openai.OpenAI(base_url=f"{serve.url}/v1", api_key=KEY, max_retries=0, timeout=3)
    with pytest.raises(openai.APITimeoutError):
        impatient.chat.completions.create(
            model="collective", messages=[{"role": "user", "content": question}]
        )
    assert len(models.prompts) > start
    assert wait_for(lambda: models.in_flight == 0, timeout=60)
    assert wait_for(lambda: running(serve) == 0, timeout=60)
    assert models.dropped > dropped and models.finished(question) == []


def test_a_backend_down_is_an_openai_error_not_a_hang(tmp_path):
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    dead = f"openai:judge@http://127.0.0.1:{port}?tokenizer=cl100k_base"
    config = tmp_path / "collective.toml"
    config.write_text(f'k = 1\njudge = "{dead}"\nspecialists = ["{dead}"]\n')
    process = Process(["serve", "--port", "0", "--config", str(config)], tmp_path).wait_ready()
    try:
        assert any("preflight" in line or "judge" in line for line in process.lines)
        client = openai.OpenAI(base_url=f"{process.url}/v1", api_key="-", max_retries=0, timeout=60)
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(
                model="collective", messages=[{"role": "user", "content": HOT_CAR}]
            )
        assert caught.value.status_code in (502, 503) and caught.value.body["message"]
        stream = client.chat.completions.create(
            model="collective", messages=[{"role": "user", "content": HOT_CAR}], stream=True
        )
        with pytest.raises(openai.APIError) as streamed:
            list(stream)
        assert str(streamed.value)
    finally:
        assert process.stop() == 0


def test_models_and_runs_need_the_key_but_health_does_not(serve):
    assert httpx.get(f"{serve.url}/health", timeout=10).status_code == 200
    runs = httpx.post(f"{serve.url}/collective/v1/runs", json={"question": "x"}, timeout=10)
    assert runs.status_code == 401


def test_run_events_are_the_live_views_events(serve):
    events = []
    with httpx.stream(
        "POST",
        f"{serve.url}/collective/v1/runs",
        json={"question": HOT_CAR, "thread": "page-thread"},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=120,
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                import json

                events.append(json.loads(line.removeprefix("data: ")))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "run" and events[0]["thread"] == "page-thread"
    assert kinds[-1] == "result" and events[-1]["result"]["citations"]
    assert {"progress", "token", "budget", "finished"} <= set(kinds)  # the live view's events
    reports = [e["report"] for e in events if e["type"] == "budget"]
    assert len(reports) == len(events[-1]["result"]["budgets"])


def test_cancel_a_run_from_the_page(serve, models):
    models.latency_s = 30
    headers = {"Authorization": f"Bearer {KEY}"}
    seen: list[dict] = []

    def read() -> None:
        import json

        with httpx.stream(
            "POST",
            f"{serve.url}/collective/v1/runs",
            json={"question": "Which filament for a hot attic? (cancelled)"},
            headers=headers,
            timeout=120,
        ) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line.removeprefix("data: ")))

    reader = threading.Thread(target=read)
    reader.start()
    assert wait_for(lambda: bool(seen), timeout=30)
    run_id = seen[0]["run_id"]
    cancelled = httpx.delete(f"{serve.url}/collective/v1/runs/{run_id}", headers=headers)
    assert cancelled.status_code == 200
    reader.join(60)
    assert not reader.is_alive()
    assert seen[-1]["type"] == "error" and "cancelled" in seen[-1]["error"]["message"]
    assert wait_for(lambda: models.in_flight == 0, timeout=60)
    assert wait_for(lambda: running(serve) == 0, timeout=60)
