"""Streaming through the council: LangGraph `messages` mode, partial proposals, judge fallback.

The backends here are scripted (a stream paced word by word, for a member that runs out of
time); the dead judge is a real refused connection. Real-model streaming is in
tests/integration/test_streaming_real.py.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

from collective.graph import build_graph
from collective.models.base import ChatDelta, ChatResult, Usage
from tests.fakes import ScriptedBackend
from tests.unit.test_graph_council import context

VERDICT = "ASA keeps its shape in a hot car [KB#mem_asa], unlike PLA."


class WordStreamer(ScriptedBackend):
    """Streams its reply word by word, `pause_s` apart; records whether the stream was closed."""

    def __init__(self, model: str, reply: str, *, pause_s: float = 0.0) -> None:
        super().__init__(model, reply)
        self.pause_s = pause_s
        self.closed_early = False

    async def stream(self, messages, *, max_tokens, **kwargs) -> AsyncIterator[ChatDelta]:  # type: ignore[override]
        self.calls.append(list(messages))
        words = str(self.reply).split(" ")
        done = False
        try:
            for i, word in enumerate(words):
                await asyncio.sleep(self.pause_s)
                yield ChatDelta(word if i == 0 else " " + word)
            done = True
        finally:
            self.closed_early = not done
        text = str(self.reply)
        usage = Usage(self._counter.count_messages(messages), self._counter.count(text))
        yield ChatDelta(result=ChatResult(text=text, usage=usage, model=self.model))


async def test_messages_mode_streams_the_verdict_with_node_metadata():
    judge = WordStreamer("judge", VERDICT)
    ctx = context(judge=judge)
    pieces: dict[str, list[str]] = {}
    async for chunk, meta in build_graph().astream(
        {"question": "Which filament for a hot car?"}, context=ctx, stream_mode="messages"
    ):
        pieces.setdefault(meta["agent"], []).append(chunk.content)
        assert meta["role"] in meta["tags"] and meta["agent"] in meta["tags"]
    assert len(pieces["judge"]) == len(VERDICT.split(" ")) > 1
    assert "".join(pieces["judge"]) == VERDICT
    # Specialists' tokens are there too, told apart by their agent.
    assert {"specialist-1", "specialist-2", "specialist-3"} <= set(pieces)
    assert pieces["judge"] != pieces["specialist-1"]


async def test_events_api_has_on_chat_model_stream_for_the_judge():
    ctx = context(judge=WordStreamer("judge", VERDICT))
    streamed = [
        event["data"]["chunk"].content
        async for event in build_graph().astream_events(
            {"question": "Which filament for a hot car?"}, context=ctx, version="v2"
        )
        if event["event"] == "on_chat_model_stream" and event["metadata"].get("agent") == "judge"
    ]
    assert "".join(streamed) == VERDICT and len(streamed) > 1


async def test_a_member_out_of_time_keeps_its_partial_answer():
    slow = WordStreamer("slow", "PETG " * 400, pause_s=0.02)  # about 8 s in all
    judge = ScriptedBackend("judge", "ASA.")
    ctx = context(
        specialists=[slow, ScriptedBackend("fast", "Use ASA.")],
        judge=judge,
        specialist_timeout_s=1.0,
    )
    out = await build_graph().ainvoke({"question": "Which filament for a hot car?"}, context=ctx)
    partial = [p for p in out["proposals"] if p.get("partial")]
    assert partial and all(p["error"] is None for p in partial)
    assert all(p["text"].startswith("PETG") for p in partial)
    assert all(len(p["text"]) < len("PETG " * 400) - 1 for p in partial)
    assert slow.closed_early  # the member's stream was closed, not left running


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


async def test_judge_fallback_chain_names_the_dead_servers_error():
    dead = f"llama-server:{_dead_url()}"
    ctx = context(judge=[dead, ScriptedBackend("judge", "ASA [KB#mem_asa].")])
    out = await build_graph().ainvoke({"question": "Which filament for a hot car?"}, context=ctx)
    assert out["answer"].splitlines()[0] == "ASA [KB#mem_asa]."
    note = next(n for n in out["notes"] if n.startswith("judge "))
    assert dead in note and "BackendUnavailable" in note and "connection refused" in note


def test_progress_view_shows_the_verdict_as_it_is_written_and_specialist_rates():
    from rich.console import Console

    from collective.commands.render import ProgressView

    console = Console(record=True, width=120, force_terminal=False)
    view = ProgressView(2, console)
    view.event({"type": "progress", "node": "specialist-1", "status": "running", "model": "m"})
    for piece in ("PETG", " softens", " at"):
        view.event({"type": "token", "node": "specialist-1", "text": piece})
    for piece in ("ASA", " holds", " up."):
        view.event({"type": "token", "node": "judge", "text": piece})
    console.print(view.render())
    shown = console.export_text()
    assert "verdict (as it is written):" in shown and "ASA holds up." in shown
    row = next(line for line in shown.splitlines() if line.strip().startswith("specialist-1"))
    assert "3..." in row  # tokens so far
    assert view.rows["specialist-1"].rate()  # tokens/s once two pieces arrived
    view.verdict_lines = 0  # as when the live view closes: the result shows the verdict
    console.print(view.render())
    assert console.export_text().count("ASA holds up.") == 0


def test_llama_server_events_assemble_tool_calls_and_reasoning_from_fragments():
    import json

    from collective.models.openai_compat import StreamedReply as _StreamedReply
    from collective.models.openai_compat import parse_chat_response

    def event(delta=None, **extra):
        choices = [] if delta is None else [{"index": 0, "delta": delta, **extra}]
        return "data: " + json.dumps({"model": "qwen", "choices": choices})

    lines = [
        event({"role": "assistant", "content": None}),
        event({"reasoning_content": "Check the "}),
        event({"reasoning_content": "KB first."}),
        event(
            {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "kb_", "arguments": ""}}]}
        ),
        event(
            {"tool_calls": [{"index": 0, "function": {"name": "search", "arguments": '{"q": '}}]}
        ),
        event({"tool_calls": [{"index": 0, "function": {"arguments": '"PETG"}'}}]}),
        event({"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "kb_get"}}]}),
        event({"tool_calls": [{"index": 1, "function": {"arguments": '{"id": "mem_1"}'}}]}),
        event({}, finish_reason="tool_calls"),
        "",
        'data: {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 9}, '
        '"timings": {"predicted_n": 9}}',
        "data: [DONE]",
    ]
    reply = _StreamedReply("http://h:1")
    payloads = [line.removeprefix("data:") for line in lines if line.startswith("data:")]
    pieces = [d for d in map(reply.feed, payloads) if d is not None]
    assert [p.reasoning for p in pieces] == ["Check the ", "KB first."]
    result = parse_chat_response(reply.body(), url="http://h:1", wall_ms=1.0)
    assert result.reasoning == "Check the KB first."
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("c1", "kb_search", {"q": "PETG"}),
        ("c2", "kb_get", {"id": "mem_1"}),
    ]
    assert result.finish_reason == "tool_calls"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (40, 9)
    assert result.timings["predicted_n"] == 9.0


def test_an_error_inside_the_event_stream_is_a_backend_error():
    import pytest

    from collective.errors import BackendUnavailable
    from collective.models.openai_compat import StreamedReply as _StreamedReply

    reply = _StreamedReply("http://h:1")
    with pytest.raises(BackendUnavailable, match="the slot crashed"):
        reply.feed('{"error": {"code": 500, "message": "the slot crashed"}}')


def test_progress_view_names_the_server_that_answered():
    from rich.console import Console

    from collective.commands.render import ProgressView

    for verbose, shown in ((False, "m @ b:8083"), (True, "m @ llama-server:http://b:8083")):
        console = Console(record=True, width=160, force_terminal=False)
        view = ProgressView(1, console, verbose=verbose)
        view.event({"type": "progress", "node": "specialist-1", "status": "running", "model": "m"})
        done = {"type": "progress", "node": "specialist-1", "status": "done", "model": "m"}
        view.event(done | {"server": "llama-server:http://b:8083", "tokens_in": 9, "tokens_out": 3})
        console.print(view.render())
        row = next(ln for ln in console.export_text().splitlines() if "specialist-1" in ln)
        assert shown in row


def test_vllms_flat_error_inside_the_event_stream_is_a_backend_error():
    import pytest

    from collective.errors import BackendUnavailable
    from collective.models.openai_compat import StreamedReply

    reply = StreamedReply("http://h:1", "OpenAI-compatible server")
    flat = '{"object": "error", "message": "engine dead", "type": "InternalServerError"}'
    with pytest.raises(BackendUnavailable, match="engine dead"):
        reply.feed(flat)
