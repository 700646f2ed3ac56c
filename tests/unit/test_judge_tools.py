"""The judge's verification tool loop: budgets, bounded rounds, citations of fetched chunks.

The exact tool-call sequence is scripted here; tests/integration/test_tools_llama_server.py
proves the request/response wiring against the real llama-server.
"""

import json

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collective.graph import CouncilContext, build_graph
from collective.kb.store import Chunk
from collective.kb.tools import VerificationTools
from collective.models.base import ToolCall
from collective.telemetry import add_span_exporter
from tests.fakes import ScriptedBackend
from tests.unit.test_graph_council import CHUNKS, ListStore

HIDDEN = Chunk("mem_deep", "ASA resists UV " + "and heat " * 400, "deep.md", (), 0.0)


class Store(ListStore):
    def search(self, query, k):
        return super().search(query, k)[:2]  # retrieval never surfaces mem_deep


def script(*steps):
    """A judge that plays `steps` in order: lists of tool calls, then a verdict string."""
    remaining = list(steps)

    def reply(messages):
        return remaining.pop(0) if len(remaining) > 1 else remaining[0]

    return reply


def context(judge, **kw):
    kw.setdefault("judge_tools", True)  # off by default
    return CouncilContext(
        k=1,
        planner=ScriptedBackend("planner", "plan"),
        specialists=[ScriptedBackend("spec", "Use ASA [KB#mem_asa]")],
        judge=judge,
        knowledge=Store([*CHUNKS, HIDDEN]),
        retrieval="lean",
        **kw,
    )


async def test_tool_results_are_budgeted_cited_and_reported():
    exporter = InMemorySpanExporter()
    add_span_exporter(exporter)
    judge = ScriptedBackend(
        "judge",
        script(
            [ToolCall("c1", "kb_get", {"id": "mem_deep"})],
            [
                ToolCall("c2", "kb_search", {"query": "hot car"}),
                ToolCall("c3", "kb_get", {"id": "x"}),
            ],
            "ASA [KB#mem_deep] [KB#mem_asa]",
        ),
        supports_tools=True,
        n_ctx=4_096,
    )
    out = await build_graph().ainvoke({"question": "q"}, context=context(judge))

    assert out["answer"].splitlines()[0] == "ASA [KB#mem_deep] [KB#mem_asa]"
    assert {"id": "mem_deep", "source": "deep.md"} in out["citations"]  # fetched by a tool
    assert out["unknown_citations"] == []
    assert [(c["name"], c["round"]) for c in out["tool_calls"]] == [
        ("kb_get", 1),
        ("kb_search", 2),
        ("kb_get", 2),
    ]
    assert all(c["tokens"] > 0 and c["result_chars"] > 0 for c in out["tool_calls"])

    judge_budgets = [b for b in out["budgets"] if b["node"] == "judge"]
    assert len(judge_budgets) == 3
    for budget in judge_budgets:
        assert budget["prompt_tokens"] + budget["max_output_tokens"] <= budget["n_ctx"] == 4_096
    tools = [next(s for s in b["sections"] if s["name"] == "tools") for b in judge_budgets]
    assert tools[0]["used"] > 0  # the schemas alone
    assert tools[1]["used"] > tools[0]["used"]  # plus the first result
    assert tools[1]["trimmed"]  # the 400-word chunk did not fit the scaled tools allocation
    assert tools[1]["used"] <= tools[1]["allocated"]

    # the second call replays the first round as tool messages, trimmed with the usual marker
    second = judge.calls[1]
    assert second[-2]["role"] == "assistant" and second[-2]["tool_calls"][0]["id"] == "c1"
    assert second[-1]["role"] == "tool" and "tokens trimmed" in second[-1]["content"]
    assert judge.kwargs[0]["tools"][0]["function"]["name"] == "kb_search"
    # the first round's call is forced (where the backend can); later rounds leave it to the model
    assert [k["tool_choice"] for k in judge.kwargs] == ["required", None, None]

    spans = [s for s in exporter.get_finished_spans() if s.name == "collective.tool_call"]
    assert [s.attributes["tool.name"] for s in spans][-3:] == ["kb_get", "kb_search", "kb_get"]
    assert json.loads(spans[-3].attributes["tool.arguments"]) == {"id": "mem_deep"}


async def test_rounds_are_bounded_and_the_loop_ends_with_a_verdict():
    def greedy(messages):
        return [ToolCall("c", "kb_search", {"query": "more"})] if len(messages) < 8 else "done"

    judge = ScriptedBackend("judge", greedy, supports_tools=True)
    out = await build_graph().ainvoke({"question": "q"}, context=context(judge, tool_rounds=2))
    assert len(out["tool_calls"]) == 2
    assert judge.kwargs[-1]["tools"] is None  # the last round offers no tools
    assert len(judge.calls) == 3


async def test_a_backend_without_tools_runs_the_judge_without_them_and_says_so():
    judge = ScriptedBackend("judge", "verdict [KB#mem_asa]", supports_tools=False)
    out = await build_graph().ainvoke({"question": "q"}, context=context(judge))
    assert out["tool_calls"] == []
    assert any("without tools" in note for note in out["notes"])
    assert judge.kwargs[0]["tools"] is None


async def test_specialists_run_without_tools_and_their_allocation_flows_as_slack():
    spec = ScriptedBackend("spec", "ok")
    ctx = context(ScriptedBackend("judge", "v"))
    ctx.specialists = [spec]
    out = await build_graph().ainvoke({"question": "q"}, context=ctx)
    assert spec.kwargs[0]["tools"] is None
    budget = next(b for b in out["budgets"] if b["node"] == "specialist-1")
    sections = {s["name"]: s for s in budget["sections"]}
    assert sections["tools"]["used"] == 0
    # the unused tools allocation (4,000) is part of the slack the KB section was granted
    assert sections["kb_chunks"]["granted"] >= sections["kb_chunks"]["allocated"] + 4_000


async def test_an_unparseable_tool_call_still_ends_in_a_verdict_without_tools():
    from collective.errors import InvalidResponse

    judge = ScriptedBackend(
        "judge",
        "ASA [KB#mem_asa]",
        supports_tools=True,
        failures=[InvalidResponse("output does not match the expected tool-call format")],
    )
    out = await build_graph().ainvoke({"question": "q"}, context=context(judge))
    assert out["answer"].splitlines()[0] == "ASA [KB#mem_asa]"
    assert [kw["tools"] is None for kw in judge.kwargs] == [False, True]
    assert any("tool call failed, ruling without tools" in note for note in out["notes"]), out[
        "notes"
    ]


async def test_chunks_fetched_before_a_failed_round_stay_citable():
    from collective.errors import InvalidResponse

    judge = ScriptedBackend(
        "judge",
        script([ToolCall("c1", "kb_get", {"id": "mem_deep"})], "ASA [KB#mem_deep]"),
        supports_tools=True,
        failures=[None, InvalidResponse("does not match the expected format")],
    )
    out = await build_graph().ainvoke({"question": "q"}, context=context(judge))
    assert [kw["tools"] is None for kw in judge.kwargs] == [False, False, True]
    assert {"id": "mem_deep", "source": "deep.md"} in out["citations"]
    assert out["unknown_citations"] == []


async def test_a_search_names_the_chunks_the_judge_was_shown_instead_of_repeating_them():
    # Measured on the demo: the judge's kb_search for its question returned 1,676 tokens, mostly
    # chunks its knowledge-base section already held, all read again by the next call.
    judge = ScriptedBackend(
        "judge",
        script([ToolCall("c1", "kb_search", {"query": "hot car"})], "ASA [KB#mem_asa]"),
        supports_tools=True,
    )
    out = await build_graph().ainvoke({"question": "q"}, context=context(judge))
    result = judge.calls[1][-1]
    assert result["role"] == "tool"
    assert "[KB#mem_asa] (its text is in the knowledge base above)" in result["content"]
    assert "keeps its shape" not in result["content"]  # mem_asa's text: once, in the KB section
    assert "keeps its shape" in judge.calls[1][1]["content"]
    assert out["citations"] == [{"id": "mem_asa", "source": "asa.md"}]


def test_a_search_shows_the_chunks_the_prompt_does_not():
    tools = VerificationTools(ListStore(CHUNKS), "lean")
    tools.shown = {"mem_asa"}
    found, parts = tools.kb_search("hot car")
    assert "[KB#mem_asa] (its text" in found and "keeps its shape" not in found
    assert "PLA softens near 55 C" in found  # not shown: its text
    # the parts say which chunks the answer shows in full: a chunk only named is none of them
    assert "mem_pla" in dict(parts) and "mem_asa" not in dict(parts)
    assert "\n".join(text for _, text in parts) == found
    assert set(tools.fetched) >= {"mem_asa", "mem_pla"}  # both citable
