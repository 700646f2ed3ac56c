"""`collective.session`: the run as a library (what `collective ask` runs, without printing)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from collective.config import CollectiveConfig
from collective.errors import ConfigError, InvalidResponse
from collective.graph import build_graph
from collective.session import CouncilSession, Watch, run_council, start_run
from tests.cli import one_error_line
from tests.fakes import ScriptedBackend
from tests.unit.test_graph_council import cite_first, context


async def test_a_new_question_on_an_unfinished_run_is_refused_until_the_user_drops_it():
    died = [InvalidResponse("judge died")] * 2  # beside the specialists, then after them
    judge = ScriptedBackend("judge", "ASA [KB#mem_asa]", failures=died)
    ctx = context(specialists=[ScriptedBackend("spec", cite_first)], judge=judge)
    session = CouncilSession(build_graph(InMemorySaver()), None, CollectiveConfig())
    with pytest.raises(InvalidResponse):
        await run_council(session, "Which filament for a hot car?", "t1", context=ctx)

    with pytest.raises(ConfigError) as refused:
        await run_council(session, "And for a boat?", "t1", context=ctx)
    message = str(refused.value)
    assert "unfinished run for 'Which filament for a hot car?'" in message
    assert "collective ask --thread t1" in message and "--abandon" in message
    state = await session.graph.aget_state({"configurable": {"thread_id": "t1"}})
    assert state.next and state.values["question"] == "Which filament for a hot car?"

    notes: list[str] = []
    start = await start_run(session, "And for a boat?", "t1", abandon=True)
    out = await run_council(
        session,
        "And for a boat?",
        "t1",
        context=ctx,
        start=start,
        watch=Watch(on_note=notes.append),
    )
    assert out["question"] == "And for a boat?"
    assert out["answer"].splitlines()[0] == "ASA [KB#mem_asa]"  # then the chunks' lines
    assert notes == ["thread t1: the unfinished run for 'Which filament for a hot car?' is dropped"]


def test_a_directory_as_the_checkpoint_database_is_one_error_line(tmp_path):
    # aiosqlite's thread, failing to open a directory, outlived the loop and printed a traceback.
    args = ["ask", "--checkpoints", str(tmp_path), "Which filament?", "-q"]
    done = subprocess.run(
        [sys.executable, "-c", "from collective.cli import main; main()", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    line = one_error_line(done.stderr)
    assert f"{tmp_path} is a directory, not a collective checkpoint database" in line
    assert "--checkpoints PATH" in line
    assert done.stdout == ""
