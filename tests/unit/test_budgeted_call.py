"""The budgeted call on its own, outside any graph: progress, caps, admission, refit."""

from __future__ import annotations

import subprocess
import sys
from contextlib import asynccontextmanager

import pytest

from collective.budget.assembly import text_section
from collective.budgeted_call import budgeted_call
from collective.errors import ContextOverflow
from collective.graph.context import CouncilContext
from collective.models.base import ToolCall
from collective.prompts import chat as prompt
from tests.fakes import ScriptedBackend


def test_the_node_seam_imports_on_its_own():
    """Importing `collective.nodes.model_call` first used to raise a circular ImportError."""
    for module in ("collective.nodes.model_call", "collective.budgeted_call"):
        run = subprocess.run(
            [sys.executable, "-c", f"import {module}"], capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr


async def ask(backend, settings=None, **kw):
    return await budgeted_call(
        settings or CouncilContext(),
        role="specialist",
        agent="specialist-1",
        backend=backend,
        contents=[text_section("system", prompt.SYSTEM), text_section("task", "why ASA?")],
        compose=prompt.compose,
        question="why ASA?",
        **kw,
    )


async def test_progress_goes_to_the_injected_callback_and_tokens_to_on_token():
    events: list[dict] = []
    tokens: list[str] = []
    call = await ask(ScriptedBackend(reply="ASA."), on_event=events.append, on_token=tokens.append)
    assert [e["type"] for e in events] == ["budget"]
    assert events[0]["node"] == "specialist-1" and events[0]["report"]["prompt_tokens"] > 0
    assert tokens == ["ASA."]
    assert call.report_dict == call.report.to_dict()


async def test_the_backends_declared_output_cap_bounds_the_answer():
    small = ScriptedBackend()
    small.output_cap = 100
    call = await ask(small)
    assert small.kwargs[0]["max_tokens"] == 100 == call.report.max_output_tokens
    # The role's configured cap wins when it is smaller.
    await ask(small, CouncilContext(output_caps={"specialist": 40}))
    assert small.kwargs[1]["max_tokens"] == 40


async def test_admission_reserves_prompt_and_output_tokens_around_the_call():
    order: list[str] = []

    class Pool:
        @asynccontextmanager
        async def reserve(self, backend, tokens, **_):
            order.append(f"reserve {tokens}")
            yield
            order.append("release")

    backend = ScriptedBackend(reply=lambda messages: order.append("chat") or "ok")
    call = await ask(backend, admission=Pool())
    reserved = call.report.prompt_tokens + call.report.max_output_tokens
    assert order == [f"reserve {reserved}", "chat", "release"]


async def test_one_refit_on_overflow_then_the_error_stands():
    overflow = ContextOverflow("too long", n_prompt_tokens=900, n_ctx=1_024)
    events: list[dict] = []
    call = await ask(ScriptedBackend(failures=[overflow]), on_event=events.append)
    first, second = (e["report"] for e in events)
    # The server's window, less what the server counted beyond our count of the first prompt.
    assert second["n_ctx"] == 1_024 - (900 - first["prompt_tokens"])
    assert call.overflow is overflow and call.report.n_ctx == second["n_ctx"]
    with pytest.raises(ContextOverflow):
        await ask(ScriptedBackend(failures=[overflow, overflow]))


SEARCH = {
    "type": "function",
    "function": {
        "name": "kb_search",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}


async def test_a_required_tool_call_is_held_to_the_tools_schema_and_read_as_a_call():
    # llama-server answers a constrained call as bare JSON content (its own parser missed it)
    backend = ScriptedBackend("m", '{"name": "kb_search", "arguments": {"query": "ASA"}}')
    backend.supports_json_schema = True
    tokens: list[str] = []
    call = await ask(backend, tools=[SEARCH], tool_choice="required", on_token=tokens.append)
    sent = backend.kwargs[0]
    assert sent["tool_choice"] == "required" and sent["tools"] == [SEARCH]
    assert [o["properties"]["name"] for o in sent["json_schema"]["anyOf"]] == [
        {"const": "kb_search"}
    ]
    assert [(c.name, c.arguments) for c in call.result.tool_calls] == [
        ("kb_search", {"query": "ASA"})
    ]
    assert call.result.text == "" and tokens == []  # a call is not answer text


async def test_a_required_call_that_is_not_a_call_is_an_invalid_response():
    from collective.errors import InvalidResponse

    backend = ScriptedBackend("m", '{"name": "filament", "arguments": {}}')
    backend.supports_json_schema = True
    with pytest.raises(InvalidResponse, match="held to a tool call"):
        await ask(backend, tools=[SEARCH], tool_choice="required")
    # without structured output the server's own tool_choice is all there is: nothing is forced
    plain = ScriptedBackend("m", "ASA.")
    call = await ask(plain, tools=[SEARCH], tool_choice="required")
    assert plain.kwargs[0]["json_schema"] is None and call.result.text == "ASA."


async def test_a_backend_that_forces_calls_itself_gets_the_tool_choice_not_a_schema():
    backend = ScriptedBackend("m", [ToolCall("c", "kb_search", {"query": "ASA"})])
    backend.supports_json_schema = backend.forces_tool_calls = True
    call = await ask(backend, tools=[SEARCH], tool_choice="required")
    assert backend.kwargs[0]["json_schema"] is None
    assert backend.kwargs[0]["tool_choice"] == "required"
    assert call.result.tool_calls[0].name == "kb_search"


async def test_a_call_the_server_left_as_text_is_read_as_a_call():
    # Qwen2.5-Coder copies its template's doubled braces; llama-server then returns it as text
    doubled = '{{"name": "kb_search", "arguments": {"query": "ASA"}}}'
    call = await ask(ScriptedBackend("m", doubled), tools=[SEARCH])
    assert [(c.name, c.arguments) for c in call.result.tool_calls] == [
        ("kb_search", {"query": "ASA"})
    ]
    # a verdict that only mentions JSON, or names no offered tool, stays the answer
    for text in ("ASA, see the KB.", '{"name": "filament", "arguments": {}}'):
        call = await ask(ScriptedBackend("m", text), tools=[SEARCH])
        assert call.result.text == text and call.result.tool_calls == []


async def test_a_replica_down_before_the_first_token_is_skipped_and_the_report_names_the_other():
    from collective.errors import BackendUnavailable
    from collective.models.replicas import ReplicaSet

    dead = ScriptedBackend("a", failures=[BackendUnavailable("connection refused by a")])
    alive = ScriptedBackend("b", reply="ASA.")
    call = await ask(ReplicaSet([dead, alive]))
    assert call.result.text == "ASA." and not alive.failures
    assert call.report.server == "scripted:b" and call.report_dict["server"] == "scripted:b"
    skipped = (
        "replica scripted:a failed before the first token (BackendUnavailable: connection "
        "refused by a); the call ran on scripted:b"
    )
    assert skipped in call.report.notes


async def test_a_lone_backend_down_fails_the_call_as_before():
    from collective.errors import BackendUnavailable

    with pytest.raises(BackendUnavailable):
        await ask(ScriptedBackend(failures=[BackendUnavailable("down")]))


async def test_every_replica_down_is_the_last_ones_error():
    from collective.errors import BackendUnavailable
    from collective.models.replicas import ReplicaSet

    a = ScriptedBackend("a", failures=[BackendUnavailable("a is down")])
    b = ScriptedBackend("b", failures=[BackendUnavailable("b is down")])
    with pytest.raises(BackendUnavailable, match="b is down"):
        await ask(ReplicaSet([a, b]))


async def test_a_call_moved_to_another_replica_is_planned_for_that_replicas_window():
    from collective.errors import BackendUnavailable
    from collective.models.replicas import ReplicaSet

    small = ScriptedBackend("a", n_ctx=2_048, failures=[BackendUnavailable("a dropped")])
    big = ScriptedBackend("b", n_ctx=8_192, reply="ASA.")
    events: list[dict] = []
    call = await ask(ReplicaSet([small, big]), on_event=events.append)
    assert [e["report"]["n_ctx"] for e in events if e["type"] == "budget"] == [2_048, 8_192]
    assert call.report.n_ctx == 8_192 and call.report.server == "scripted:b"


def test_a_replica_set_says_what_its_replicas_say_now():
    from collective.models.replicas import ReplicaSet

    a, b = ScriptedBackend("m", supports_tools=True), ScriptedBackend("m", supports_tools=True)
    replicas = ReplicaSet([a, b])
    assert replicas.supports_tools and replicas.model == "m"
    b.supports_tools = False  # learnt later, as llama-server learns it from /props
    a.model = "gemma-3-270m"
    assert not replicas.supports_tools and replicas.model == "gemma-3-270m"
    assert replicas.spec == "scripted:m | scripted:m"
