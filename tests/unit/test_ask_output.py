"""`collective ask --json` prints the documented output keys, not every state channel."""

from __future__ import annotations

import asyncio

from langgraph.checkpoint.memory import InMemorySaver

from collective.config import CollectiveConfig
from collective.graph import build_graph
from collective.session import CouncilSession, run_council
from tests.fakes import ScriptedBackend
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
        "evidence",
        "citation_support",
        "claims",
        "claim_check",
        "confidence",
        "confidence_note",  # the scripted backend reports no log-probabilities: it says so
        "notes",
        "thread_id",
        "finish_reason",
        "answer_cut",
    }  # no chunks, memory, plan, conversation or started_at


class SlowDiskSaver(InMemorySaver):
    """A checkpointer whose writes take a while (a slow disk), as a fault no test box makes."""

    async def aput(self, config, checkpoint, metadata, new_versions):
        await asyncio.sleep(0.3)
        return await super().aput(config, checkpoint, metadata, new_versions)


async def test_a_finished_step_is_on_disk_before_the_next_model_call():
    # Ctrl-C twice quits at once (os._exit): what finished must already be checkpointed.
    saver = SlowDiskSaver()
    thread = {"configurable": {"thread_id": "t2"}}
    seen: list[bool] = []

    def plan(messages):
        saved = saver.get_tuple(thread)
        seen.append(saved is not None and "retrieval" in saved.checkpoint["channel_values"])
        return "Specialist 1: heat."

    session = CouncilSession(build_graph(saver), None, CollectiveConfig())
    ctx = context(planner=ScriptedBackend("planner", plan))
    await run_council(session, "Which filament for a hot car?", "t2", context=ctx)
    assert seen == [True]  # the retrieve step's checkpoint was written before the planner ran
