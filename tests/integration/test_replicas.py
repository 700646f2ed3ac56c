"""Replicas: two real llama-server processes as equivalent servers for every role (issue 27).

With one stopped before the run, and with one killed during the run (as the specialists start),
every member answers; each budget report names the replica that answered; `collective smoke`
checks each replica on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ServerProcess, serve_llama_server
from langgraph.checkpoint.memory import InMemorySaver

from collective.budget.plans import ModelBudget
from collective.graph import CouncilContext, build_graph
from collective.kb.demo import open_default_store
from collective.models.registry import close_all

pytestmark = pytest.mark.integration

QUESTION = "Which filament survives a hot car?"
SLOT = 2048
OUTPUT = 16


def plan(name: str, sections: dict[str, int]) -> ModelBudget:
    return ModelBudget(name, SLOT, sum(sections.values()), OUTPUT, sections)


BUDGETS = {
    "planner": plan("planner", {"system": 200, "kb_chunks": 100, "task": 100}),
    "specialist": plan("specialist", {"system": 300, "kb_chunks": 300, "task": 150}),
    "judge": plan("judge", {"system": 200, "kb_chunks": 100, "proposals": 400, "task": 100}),
}


@pytest.fixture(scope="module")
def replicas(llama_server_binary: str, gguf_path: Path) -> Iterator[list[ServerProcess]]:
    args = ("-c", str(SLOT), "-np", "1")
    servers = [
        serve_llama_server(llama_server_binary, gguf_path, *args, name=f"replica-{n}")
        for n in ("a", "b")
    ]
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


def context(servers: list[ServerProcess], tmp_path: Path) -> CouncilContext:
    spec = " | ".join(f"llama-server:{s.url}" for s in servers)
    open_default_store(tmp_path / "kb.sqlite").close()
    return CouncilContext(
        k=3,
        planner=spec,
        specialists=(spec,),
        judge=spec,
        judge_tools=False,
        kb=str(tmp_path / "kb.sqlite"),
        retrieval="lean",
        budgets=BUDGETS,
        temperature=0.0,
        usage_log=None,
    )


def every_member_answered(out: dict) -> None:
    members = [p["member"] for p in out["proposals"]]
    assert members == ["specialist-1", "specialist-2", "specialist-3"]
    assert all(p["error"] is None and p["text"].strip() for p in out["proposals"]), out["proposals"]
    assert out["answer"].strip()


async def test_a_replica_stopped_before_the_run_is_skipped(
    replicas: list[ServerProcess], tmp_path: Path
) -> None:
    a, b = replicas
    a.stop()
    try:
        out = await build_graph(checkpointer=InMemorySaver()).ainvoke(
            {"question": QUESTION},
            {"configurable": {"thread_id": "before"}},
            context=context(replicas, tmp_path),
        )
    finally:
        await close_all()
        a.start()
    every_member_answered(out)
    servers = {r["node"]: r["server"] for r in out["budgets"]}
    assert set(servers.values()) == {f"llama-server:{b.url}"}, servers  # named, all on b
    assert {"plan", "specialist-1", "specialist-2", "specialist-3", "judge"} <= servers.keys()


async def test_a_replica_killed_during_the_run_leaves_every_member_answering(
    replicas: list[ServerProcess], tmp_path: Path
) -> None:
    a, b = replicas
    graph = build_graph(checkpointer=InMemorySaver())
    killed = False
    out: dict = {}
    try:
        async for mode, chunk in graph.astream(
            {"question": QUESTION},
            {"configurable": {"thread_id": "during"}},
            context=context(replicas, tmp_path),
            stream_mode=["custom", "values"],
        ):
            if mode == "values":
                out = chunk
            elif not killed and chunk.get("type") == "budget":
                if str(chunk.get("node", "")).startswith("specialist-"):
                    assert a.proc is not None
                    a.proc.kill()  # a crash, as the specialists are being sent
                    await asyncio.to_thread(a.proc.wait, 10)
                    killed = True
    finally:
        await close_all()
        a.proc = None
        a.start()
    assert killed
    every_member_answered(out)
    servers = {r["node"]: r["server"] for r in out["budgets"]}
    assert set(servers.values()) <= {f"llama-server:{a.url}", f"llama-server:{b.url}"}
    assert servers["judge"] == f"llama-server:{b.url}"  # after the crash: the live replica
    members = [servers[f"specialist-{i}"] for i in (1, 2, 3)]
    assert f"llama-server:{b.url}" in members
