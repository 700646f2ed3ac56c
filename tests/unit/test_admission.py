"""Admission control and server-pool reading, without a server (the real ones are in
tests/integration/test_pool_llama_server.py and test_backends_ollama.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import asynccontextmanager

import pytest

from collective.budget.assembly import text_section
from collective.budget.counting import EstimateCounter
from collective.budgeted_call import budgeted_call, cut_answer_warning
from collective.errors import BackendUnavailable, ContextOverflow, PoolExhausted
from collective.graph.context import CouncilContext
from collective.models.admission import (
    KV_LOG_FIELD,
    AdmissionControl,
    ServerPool,
)
from collective.models.base import ChatResult, Usage
from collective.models.llama_server import llama_server_pool
from collective.models.ollama_api import ollama_pool, overflow_from_refusal
from collective.models.openai_compat import http_error as _http_error
from collective.nodes.retry import is_transient
from tests.fakes import ScriptedBackend

URL = "http://127.0.0.1:8083"


def props(n_ctx: int, slots: int) -> dict:
    return {"default_generation_settings": {"n_ctx": n_ctx}, "total_slots": slots}


def test_one_slot_is_its_own_pool():
    pool = llama_server_pool(props(4096, 1), None, server=URL)
    assert (pool.slots, pool.slot_ctx, pool.tokens, pool.unified) == (1, 4096, 4096, False)


def test_several_slots_are_read_as_one_unified_pool_unless_told_otherwise():
    # `llama-server -c 8192` (no -np): 4 slots, each reporting the whole -c.
    unified = llama_server_pool(props(8192, 4), None, server=URL)
    assert (unified.slots, unified.tokens, unified.unified) == (4, 8192, True)
    assert "unified" in unified.describe()
    assert "[" not in unified.describe()  # the smoke table reads [..] as rich markup
    per_slot = llama_server_pool(props(4096, 2), None, server=URL, kv="per-slot")
    assert (per_slot.tokens, per_slot.unified) == (8192, False)


def test_slots_endpoint_refines_props():
    slots = [{"id": i, "n_ctx": 2048} for i in range(3)]
    pool = llama_server_pool(props(4096, 4), slots, server=URL, kv="per-slot")
    assert (pool.slots, pool.slot_ctx, pool.tokens) == (3, 2048, 6144)
    with pytest.raises(ValueError, match="n_ctx"):
        llama_server_pool({"total_slots": 2}, None, server=URL)


def test_ollama_pool_is_num_parallel_requests_of_the_num_ctx_sent():
    pool = ollama_pool(3072, server="ollama", num_ctx=3072, num_parallel=2)
    assert (pool.slots, pool.slot_ctx, pool.tokens, pool.unified) == (2, 3072, 6144, False)
    assert "/api/ps context_length 3072" in pool.source


class Server:
    """Just enough of a backend for admission: its pool, and calls that can be held open."""

    def __init__(self, pool: ServerPool | None) -> None:
        self._pool = pool
        self.in_flight = 0
        self.max_in_flight = 0

    async def pool(self) -> ServerPool | None:
        return self._pool

    async def call(self, admission: AdmissionControl, tokens: int, release: asyncio.Event, log):
        async with admission.reserve(self, tokens, label=f"call-{tokens}", on_wait=log.append):
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            await release.wait()
            self.in_flight -= 1


async def run_calls(server: Server, sizes: list[int]) -> tuple[AdmissionControl, list[str]]:
    admission, waits, release = AdmissionControl(), [], asyncio.Event()
    tasks = [asyncio.create_task(server.call(admission, n, release, waits)) for n in sizes]
    for _ in range(50):  # let every call reach the server or the queue
        await asyncio.sleep(0)
    release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)
    return admission, waits


async def test_a_unified_pool_holds_the_sum_of_reservations_to_its_size():
    pool = ServerPool(URL, 4, 1024, 1024, True, "test")
    server = Server(pool)
    admission, waits = await run_calls(server, [450] * 12)
    assert server.max_in_flight == 2  # never a third: it waits for room
    assert admission.peak[URL] == 900 <= pool.tokens
    assert len(admission.records) == 12
    assert all(used <= pool.tokens for _, used, _ in admission.records)
    assert waits and all(w.startswith(f"waiting for KV room on {URL}") for w in waits)


async def test_every_wait_admission_and_release_is_logged_with_the_tokens_in_flight(caplog):
    caplog.set_level(logging.INFO, logger="collective.models.admission")
    await run_calls(Server(ServerPool(URL, 4, 1024, 1024, True, "test")), [600, 500])
    events = [getattr(r, KV_LOG_FIELD) for r in caplog.records]
    steps = [(e["event"], e["label"], e["in_flight"]) for e in events]
    assert steps == [
        ("admit", "call-600", 600),
        ("wait", "call-500", 600),
        ("release", "call-600", 0),
        ("admit", "call-500", 500),
        ("release", "call-500", 0),
    ]
    assert all(e["server"] == URL and e["pool"] == 1024 for e in events)


async def test_independent_slots_run_fully_in_parallel():
    server = Server(ServerPool(URL, 3, 1024, 3072, False, "test"))
    _, waits = await run_calls(server, [1000, 1000, 1000])
    assert server.max_in_flight == 3 and waits == []


async def test_no_pool_means_no_waiting_and_a_call_larger_than_the_pool_runs_alone():
    free = Server(None)
    _, waits = await run_calls(free, [10_000] * 4)
    assert free.max_in_flight == 4 and waits == []
    small = Server(ServerPool(URL, 4, 1024, 1024, True, "test"))
    await run_calls(small, [5_000, 5_000])
    assert small.max_in_flight == 1


async def test_a_pool_exhaustion_makes_independent_slots_count_as_one_pool():
    pool = ServerPool(URL, 2, 1024, 2048, False, "test")
    server = Server(pool)
    admission = AdmissionControl()
    admission.exhausted(pool)
    release, waits = asyncio.Event(), []
    tasks = [asyncio.create_task(server.call(admission, 800, release, waits)) for _ in range(2)]
    for _ in range(50):
        await asyncio.sleep(0)
    release.set()
    await asyncio.gather(*tasks)
    assert server.max_in_flight == 1 and len(waits) == 1


def test_context_size_exceeded_is_pool_exhaustion_and_not_retried_blindly():
    body = {"error": {"code": 500, "message": "Context size has been exceeded.", "type": "server"}}
    error = _http_error(500, body, URL)
    assert isinstance(error, PoolExhausted) and not isinstance(error, BackendUnavailable)
    assert not is_transient(error)
    assert "-np" in str(error)


def answer(finish: str, completion: int, prompt: int = 1749) -> ChatResult:
    return ChatResult("text", Usage(prompt, completion), "m", finish_reason=finish)


def test_an_answer_cut_by_the_context_is_reported_loudly():
    # The case: 1,749 prompt + 384 reserved on a restarted 2,048 slot: 299 generated.
    warning = cut_answer_warning(answer("length", 299), max_tokens=384, n_ctx=4096, server=URL)
    assert warning and warning.startswith("CUT ANSWER") and "299 of 384" in warning
    assert cut_answer_warning(answer("length", 384), max_tokens=384, n_ctx=4096, server=URL) is None
    assert cut_answer_warning(answer("stop", 12), max_tokens=384, n_ctx=4096, server=URL) is None
    smaller = answer("stop", 12)
    smaller.timings["n_ctx"] = 2048
    assert "n_ctx 2048" in (
        cut_answer_warning(smaller, max_tokens=384, n_ctx=4096, server=URL) or ""
    )


def test_ollamas_refusal_becomes_context_overflow_with_its_counts():
    message = "the input length (5000 tokens) exceeds the context length (4096 tokens)"
    overflow = overflow_from_refusal(400, message, counted=4900, num_ctx=4096, model="m", url=URL)
    assert isinstance(overflow, ContextOverflow)
    assert (overflow.n_prompt_tokens, overflow.n_ctx) == (5000, 4096)
    bare = overflow_from_refusal(
        400,
        "the input length exceeds the context length",
        counted=4900,
        num_ctx=4096,
        model="m",
        url=URL,
    )
    assert bare is not None and (bare.n_prompt_tokens, bare.n_ctx) == (4900, 4096)
    assert (
        overflow_from_refusal(400, "invalid options", counted=1, num_ctx=2, model="m", url=URL)
        is None
    )


def test_a_counter_without_a_template_counts_tool_schemas_as_json():
    counter = EstimateCounter()
    messages = [{"role": "user", "content": "hi"}]
    tools = [{"type": "function", "function": {"name": "kb_search", "parameters": {}}}]
    assert counter.count_messages(messages, tools) == counter.count_messages(
        messages
    ) + counter.count(json.dumps(tools))


class CutShort(ScriptedBackend):
    """Answers with `finish_reason` length after 5 tokens, whatever was reserved."""

    async def chat(self, messages, *, max_tokens, **kwargs):
        result = await super().chat(messages, max_tokens=max_tokens, **kwargs)
        usage = Usage(result.usage.prompt_tokens, 5)
        return ChatResult("cut", usage, result.model, finish_reason="length")


async def ask(backend, **kw):
    return await budgeted_call(
        CouncilContext(),
        role="specialist",
        agent="specialist-1",
        backend=backend,
        contents=[text_section("system", "Answer."), text_section("task", "why ASA?")],
        compose=lambda s: [
            {"role": "system", "content": s["system"]},
            {"role": "user", "content": s["task"]},
        ],
        question="why ASA?",
        **kw,
    )


async def test_a_cut_answer_is_in_the_warnings_and_the_budget_report():
    call = await ask(CutShort())
    assert any(w.startswith("CUT ANSWER") for w in call.result.warnings)
    assert any(n.startswith("CUT ANSWER") for n in call.report_dict["notes"])


async def test_pool_exhaustion_is_sent_once_more_then_stands():
    exhausted = PoolExhausted("Context size has been exceeded.")
    backend = ScriptedBackend(reply="ok", failures=[exhausted])
    call = await ask(backend)
    assert call.result.text == "ok" and len(backend.kwargs) == 2
    with pytest.raises(PoolExhausted):
        await ask(ScriptedBackend(failures=[exhausted, exhausted]))


async def test_a_pool_exhaustion_is_blamed_on_the_replica_the_call_ran_on():
    from collective.models.replicas import ReplicaSet

    class Pooled(ScriptedBackend):
        async def pool(self) -> ServerPool:
            return ServerPool(f"http://{self.model}", 2, 4096, 8192, False, "test")

    class OnTheLast(AdmissionControl):
        """Places every call on the last candidate: not the replica it was planned for."""

        def __init__(self) -> None:
            super().__init__()
            self.blamed: list[str] = []

        def exhausted(self, pool: ServerPool | None) -> None:
            assert pool is not None
            self.blamed.append(pool.server)
            super().exhausted(pool)

        @asynccontextmanager
        async def place(self, backends, tokens, *, label="", on_wait=None, on_left_out=None):
            yield backends[-1], await backends[-1].pool()

    planned = Pooled("a", reply="from a")
    ran = Pooled("b", reply="from b", failures=[PoolExhausted("Context size has been exceeded.")])
    admission = OnTheLast()
    call = await ask(ReplicaSet([planned, ran]), admission=admission)
    assert call.result.text == "from b" and not planned.calls
    assert admission.blamed == ["http://b"]  # the healthy planned server keeps its slots


async def test_replicas_never_wait_on_a_full_server_while_another_has_room():
    a = Server(ServerPool("http://a", 1, 1024, 1024, False, "test"))
    b = Server(ServerPool("http://b", 1, 1024, 1024, False, "test"))
    admission, release = AdmissionControl(), asyncio.Event()
    placed: list[Server] = []
    waits: list[str] = []

    async def member(n: int) -> None:
        async with admission.place([a, b], 600, label=f"m{n}", on_wait=waits.append) as (s, _):
            placed.append(s)
            await release.wait()

    tasks = [asyncio.create_task(member(n)) for n in range(3)]
    for _ in range(50):
        await asyncio.sleep(0)
    assert placed == [a, b]  # the second member went to the free replica, not into a queue
    assert len(waits) == 1 and waits[0].startswith("waiting for KV room on http://a or http://b")
    release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)
    assert len(placed) == 3 and admission.peak == {"http://a": 600, "http://b": 600}


async def test_a_replica_that_does_not_report_its_pool_is_left_out():
    class Down(Server):
        spec = "llama-server:http://down"

        async def pool(self) -> ServerPool | None:
            raise BackendUnavailable("cannot connect")

    up = Server(ServerPool("http://up", 1, 1024, 1024, False, "test"))
    admission = AdmissionControl()
    async with admission.place([Down(None), up], 100) as (chosen, pool):
        assert chosen is up and pool is not None and pool.server == "http://up"
    with pytest.raises(BackendUnavailable):
        async with admission.place([Down(None), Down(None)], 100):
            pass
