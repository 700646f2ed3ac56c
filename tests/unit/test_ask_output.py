"""`collective ask --json` prints the documented output keys, not every state channel."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from collective.commands.ask import CouncilSession, run_council
from collective.config import CollectiveConfig
from collective.graph import build_graph
from tests.unit.test_graph_council import context


async def test_the_result_has_exactly_the_output_keys():
    session = CouncilSession(build_graph(InMemorySaver()), None, CollectiveConfig())
    result = await run_council(session, "Which filament for a hot car?", "t1", context=context())
    assert set(result) == {
        "question",
        "answer",
        "citations",
        "unknown_citations",
        "proposals",
        "budgets",
        "retrieval",
        "timings",
        "rankings",
        "ranking_aggregate",
        "tool_calls",
        "notes",
        "thread_id",
        "finish_reason",
        "answer_cut",
    }  # no chunks, memory, plan, conversation or started_at
