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


async def test_the_knobs_that_change_an_answer_are_stored_with_the_thread_and_resumed(
    monkeypatch, tmp_path
):
    """Issue 55: rerank, entailment, synonyms, complexity signals and the expansion model were
    read from the environment at each call; they are settings now, kept with the thread."""
    import json
    from importlib import resources

    from collective.config import load_config
    from collective.session import SETTINGS_KEY, SettingsConflict

    synonyms, signals = tmp_path / "my-synonyms.txt", tmp_path / "my-signals.toml"
    synonyms.write_text("hot warm heated\n", encoding="utf-8")
    packaged = resources.files("collective") / "data/complexity_signals.toml"
    signals.write_text(packaged.read_text(encoding="utf-8"), encoding="utf-8")
    for name, value in {
        "COLLECTIVE_RERANK": "none",
        "COLLECTIVE_ENTAILMENT": "judge",
        "COLLECTIVE_SYNONYMS": str(synonyms),
        "COLLECTIVE_COMPLEXITY_SIGNALS": str(signals),
        "COLLECTIVE_KB_EXPANSION": "none",
    }.items():
        monkeypatch.setenv(name, value)
    then = load_config(None, {"k": 3}, dotenv=None).config
    died = [InvalidResponse("judge died")] * 2
    judge = ScriptedBackend("judge", "ASA [KB#mem_asa]", failures=died)
    ctx = context(specialists=[ScriptedBackend("spec", cite_first)], judge=judge)
    session = CouncilSession(build_graph(InMemorySaver()), None, then)
    with pytest.raises(InvalidResponse):
        await run_council(session, "Which filament for a hot car?", "t9", context=ctx)
    state = await session.graph.aget_state({"configurable": {"thread_id": "t9"}})
    stored = json.loads(state.metadata[SETTINGS_KEY])
    assert (stored["rerank"], stored["entailment"]) == ("none", "judge")
    assert (stored["synonyms"], stored["complexity_signals"]) == (str(synonyms), str(signals))
    assert stored["kb_expansion"] == "none"

    for name in ("COLLECTIVE_RERANK", "COLLECTIVE_ENTAILMENT", "COLLECTIVE_SYNONYMS"):
        monkeypatch.delenv(name)
    now = load_config(None, {"k": 1}, dotenv=None).config
    later = CouncilSession(session.graph, None, now)
    resumed = await start_run(later, None, "t9")
    assert (resumed.config.rerank, resumed.config.entailment) == ("none", "judge")
    assert resumed.config.council_context().synonyms == str(synonyms)
    assert resumed.config.k == 3 and resumed.graph_input is None
    # A setting chosen on purpose that differs is refused, in the library's own words: the
    # setting's name, not a command-line flag (the CLI names its flags itself).
    with pytest.raises(SettingsConflict) as refused:
        await start_run(later, None, "t9", explicit=["k"])
    assert refused.value.changes == {"k": (3, 1)}
    message = str(refused.value)
    assert "thread t9 was started with k 3 (now 1)" in message
    assert "leave out the setting k" in message and "--" not in message
    assert "leave out --k" in refused.value.explain({"k": "--k"})
