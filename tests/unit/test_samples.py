"""Same-prompt samples: members that sample one prompt alike are answered by one request.

The wire format of a request for several completions is llama-server's own (`n`, its
`n_cmpl`), copied from the vendored build's answer; one request on it is checked against the
real server in tests/integration/test_backends_llama_server.py.
"""

from __future__ import annotations

import json
from dataclasses import replace

from collective.graph import CouncilContext
from collective.graph.builder import build_answer_graph
from collective.kb.store import Chunk
from collective.models.base import ChatDelta, ChatResult, Usage
from collective.models.openai_compat import StreamedReply, parse_chat_response
from tests.fakes import ListStore, ScriptedBackend

QUESTION = "Which filament survives a hot car?"
KB = ListStore([Chunk("mem_a", "ASA resists heat up to about 95 C.", "a.md", score=0.9)])

# llama-server 0.3.36's stream for `"n": 2`: each completion under its choice index, each one's
# usage in a chunk without a choice right after its last.
N2_STREAM = [
    {"choices": [{"index": 1, "delta": {"role": "assistant", "content": None}}]},
    {"choices": [{"index": 1, "delta": {"content": "Blue"}}]},
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
    {"choices": [{"index": 0, "delta": {"content": "Red"}}]},
    {"choices": [{"index": 0, "delta": {"content": " wine"}}]},
    {"choices": [{"finish_reason": "stop", "index": 1, "delta": {}}]},
    {"choices": [], "usage": {"completion_tokens": 1, "prompt_tokens": 33, "total_tokens": 34}},
    {"choices": [{"finish_reason": "length", "index": 0, "delta": {}}]},
    {"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 33, "total_tokens": 35}},
]


def test_a_stream_of_two_completions_keeps_each_apart() -> None:
    """Before, both completions' text ran together into one answer ("BlueRed wine")."""
    reply = StreamedReply("http://h:1")
    deltas = [reply.feed(json.dumps(chunk)) for chunk in N2_STREAM]
    assert "".join(d.text for d in deltas if d is not None) == "Red wine"  # the first streams
    first = parse_chat_response(reply.body(), url="http://h:1", wall_ms=1.0)
    (other,) = [
        parse_chat_response(b, url="http://h:1", wall_ms=1.0) for b in reply.sample_bodies()
    ]
    assert (first.text, first.finish_reason, first.usage.completion_tokens) == (
        "Red wine",
        "length",
        2,
    )
    assert (other.text, other.finish_reason, other.usage.completion_tokens) == ("Blue", "stop", 1)


def alike(backend: ScriptedBackend, **settings) -> CouncilContext:
    """K = 3 members on one backend that sample alike: one temperature, shared chunks."""
    return CouncilContext(
        k=3,
        specialists=[backend],
        judge=ScriptedBackend("judge", "ASA resists heat up to about 95 C [KB#mem_a]."),
        knowledge=KB,
        retrieval="lean",
        evidence="shared",
        **({"temperature": 0.7, "member_temperature_step": 0.0} | settings),
    )


async def members_answer(ctx: CouncilContext) -> dict:
    """The council's K members answer (retrieval, then the members: no judge)."""
    return await build_answer_graph(ctx.k, judge=False).ainvoke({"question": QUESTION}, context=ctx)


def specialist_reports(out: dict) -> list[dict]:
    return [b for b in out["budgets"] if b["node"].startswith("specialist")]


async def test_members_that_sample_alike_are_one_call_with_a_seed_each() -> None:
    """A backend with one completion a request gets one request per sample, at once, each
    with its own seed; the council reports one call of three completions."""
    members = ScriptedBackend("m", "ASA [KB#mem_a]", latency_s=0.05)
    result = await members_answer(alike(members))
    assert [p["member"] for p in result["proposals"]] == [
        "specialist-1",
        "specialist-2",
        "specialist-3",
    ]
    assert all(p["text"] == "ASA [KB#mem_a]" for p in result["proposals"])
    assert len({json.dumps(call) for call in members.calls}) == 1  # one prompt
    assert "specialist-" not in members.calls[0][-1]["content"]  # that names none of them
    assert [k["seed"] for k in members.kwargs] == [None, 1, 2]
    assert members.max_in_flight == 3
    (report,) = specialist_reports(result)
    assert report["completions"] == 3 and report["fits"]
    assert report["output_tokens"] == 3 * members._counter.count("ASA [KB#mem_a]")


async def test_members_that_sample_apart_are_a_call_each() -> None:
    """A temperature each (the default spread), or greedy: one call per member, named."""
    for settings in ({"temperature": 0.2, "member_temperature_step": 0.3}, {"temperature": 0.0}):
        members = ScriptedBackend("m", "ASA [KB#mem_a]")
        result = await members_answer(alike(members, **settings))
        assert len(specialist_reports(result)) == 3
        assert [k["seed"] for k in members.kwargs] == [None] * 3
        assert all(f"specialist-{i + 1}" in c[-1]["content"] for i, c in enumerate(members.calls))


class ManyAtOnce(ScriptedBackend):
    """A server that answers several completions in one request (`n`), as llama-server does."""

    async def most_samples(self) -> int:
        return 4

    async def chat(self, messages, *, n=1, **options) -> ChatResult:
        first = await super().chat(messages, **options)
        self.kwargs[-1]["n"] = n
        others = [replace(first, text=f"{first.text} ({i})") for i in range(1, n)]
        return replace(first, samples=others)

    async def stream(self, messages, **options):
        result = await self.chat(messages, **options)
        yield ChatDelta(result.text)
        yield ChatDelta(result=result)


async def test_a_server_that_serves_several_completions_gets_one_request() -> None:
    members = ManyAtOnce("m", "ASA [KB#mem_a]")
    result = await members_answer(alike(members))
    assert len(members.calls) == 1 and members.kwargs[0]["n"] == 3
    texts = [p["text"] for p in result["proposals"]]
    assert texts == ["ASA [KB#mem_a]", "ASA [KB#mem_a] (1)", "ASA [KB#mem_a] (2)"]
    (report,) = specialist_reports(result)
    assert report["completions"] == 3


async def test_a_sample_that_wrote_nothing_fails_alone() -> None:
    members = ManyAtOnce("m", "ASA [KB#mem_a]")

    async def chat(messages, *, n=1, **options) -> ChatResult:
        result = await ManyAtOnce.chat(members, messages, n=n, **options)
        empty = ChatResult(text="", usage=Usage(1, 0), model="m", finish_reason="stop")
        return replace(result, samples=[result.samples[0], empty])

    members.chat = chat  # type: ignore[method-assign]
    result = await members_answer(alike(members))
    errors = [(p["member"], bool(p["error"])) for p in result["proposals"]]
    assert errors == [("specialist-1", False), ("specialist-2", False), ("specialist-3", True)]
    assert "wrote nothing" in result["proposals"][2]["error"]


async def test_a_server_that_gives_fewer_completions_fails_the_members_left() -> None:
    members = ManyAtOnce("m", "ASA [KB#mem_a]")

    async def chat(messages, *, n=1, **options) -> ChatResult:
        result = await ManyAtOnce.chat(members, messages, n=n, **options)
        return replace(result, samples=[])  # n ignored: one completion

    members.chat = chat  # type: ignore[method-assign]
    result = await members_answer(alike(members))
    assert [bool(p["error"]) for p in result["proposals"]] == [False, True, True]
    assert "gave 1 of 3 completions" in result["proposals"][1]["error"]


async def test_a_sample_that_fails_stops_the_others() -> None:
    """Sent one by one, a failed sample's call fails the group and the other requests are
    stopped (before, they ran on to their end, unread)."""
    import asyncio

    from collective.errors import InvalidResponse

    stopped: list[int] = []

    class OneFails(ScriptedBackend):
        async def chat(self, messages, *, seed=None, **options) -> ChatResult:
            if seed == 1:
                raise InvalidResponse("garbled")
            try:
                await asyncio.sleep(0 if seed is None else 60)
            except asyncio.CancelledError:
                stopped.append(seed)
                raise
            return await super().chat(messages, seed=seed, **options)

    result = await asyncio.wait_for(members_answer(alike(OneFails("m", "ASA [KB#mem_a]"))), 30)
    assert all("garbled" in p["error"] for p in result["proposals"])
    assert stopped == [2]
