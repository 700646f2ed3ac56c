"""`collective threads prune --older-than`: checkpoint retention (SQLite here, Postgres in
tests/integration/test_postgres.py)."""

import time
from contextlib import AsyncExitStack

from typer.testing import CliRunner

from collective.cli import app
from collective.graph import CouncilContext, build_graph
from collective.kb.store import Chunk
from collective.memory import store as storage
from tests.fakes import ScriptedBackend


class OneChunk:
    chunk = Chunk("mem_asa", "ASA keeps its shape to about 95 C.", "asa.md", (), 0.9)

    def search(self, query, k):
        return [self.chunk]

    def get(self, chunk_id):
        return self.chunk if chunk_id == "mem_asa" else None


def context():
    return CouncilContext(
        k=1,
        planner=ScriptedBackend("planner", "plan"),
        specialists=[ScriptedBackend("spec", "ASA [KB#mem_asa]")],
        judge=ScriptedBackend("judge", "ASA [KB#mem_asa]"),
        knowledge=OneChunk(),
        retrieval="balanced",
    )


async def run_on(path, thread):
    async with AsyncExitStack() as stack:
        saver = await storage.open_checkpointer(path, stack)
        council = build_graph(checkpointer=saver)
        config = {"configurable": {"thread_id": thread}}
        await council.ainvoke({"question": "Hot car?"}, config, context=context())


async def threads_in(path):
    async with AsyncExitStack() as stack:
        saver = await storage.open_checkpointer(path, stack)
        return sorted({c.config["configurable"]["thread_id"] async for c in saver.alist(None)})


async def test_prune_deletes_only_threads_last_used_before_the_cutoff(tmp_path, monkeypatch):
    db = str(tmp_path / "checkpoints.sqlite")
    await run_on(db, "old")
    between = time.time()
    while time.time() <= between:  # the next checkpoint is strictly later
        time.sleep(0.001)
    await run_on(db, "new")
    now = between + 3600
    monkeypatch.setattr(storage.time, "time", lambda: now)
    assert await storage.prune_threads(db, 3600, dry_run=True) == ["old"]
    assert await threads_in(db) == ["new", "old"]
    assert await storage.prune_threads(db, 3600) == ["old"]
    assert await threads_in(db) == ["new"]


def test_cli_prune(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    import asyncio

    asyncio.run(run_on("cp.sqlite", "t1"))
    result = CliRunner().invoke(
        app, ["threads", "prune", "--older-than", "0s", "--checkpoints", "cp.sqlite"]
    )
    assert result.exit_code == 0, result.output
    assert "t1" in result.output and "pruned 1 threads" in result.output
    assert asyncio.run(threads_in("cp.sqlite")) == []


def test_cli_prune_refuses_a_bad_age_and_a_bad_location(tmp_path, monkeypatch, capsys):
    from collective.cli import main

    monkeypatch.chdir(tmp_path)
    for argv, words in [
        (["threads", "prune", "--older-than", "soon"], "30d, 12h, 90m"),
        (
            ["threads", "prune", "--older-than", "1d", "--checkpoints", "mysql://h/db"],
            "neither a file path nor a postgresql:// URL",
        ),
    ]:
        try:
            main(argv)
        except SystemExit as exc:
            assert exc.code == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing created
