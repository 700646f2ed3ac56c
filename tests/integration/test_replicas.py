"""Replicas: two real llama-server processes as equivalent servers for every role (issue 27).

With one stopped before the run, and with one killed during the run (as the specialists start),
every member answers; each budget report names the replica that answered; `collective smoke`
checks each replica on its own. A replica lost mid-answer, or never started, is named where the
user looks: `--json`'s notes, each budget report's `faults` (issue 38).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import ServerProcess, council_killing, free_port, serve_llama_server
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


def context(servers: list[ServerProcess], tmp_path: Path, **extra) -> CouncilContext:
    spec = " | ".join(f"llama-server:{s.url}" for s in servers)
    open_default_store(tmp_path / "kb.sqlite").close()
    settings = {
        "k": 3,
        "planner": spec,
        "specialists": (spec,),
        "judge": spec,
        "judge_tools": False,
        "kb": str(tmp_path / "kb.sqlite"),
        "retrieval": "lean",
        "budgets": BUDGETS,
        "temperature": 0.0,
        "usage_log": None,
    }
    return CouncilContext(**{**settings, **extra})


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


def generating(server: ServerProcess, tokens: int) -> bool:
    """Whether a slot of `server` is writing an answer now, `tokens` of it decoded at least."""
    slots = httpx.get(server.url + "/slots", timeout=5).json()

    def decoded(slot: dict) -> int:
        nxt = slot.get("next_token") or {}
        return int((nxt[0] if isinstance(nxt, list) else nxt).get("n_decoded", 0))

    return any(s.get("is_processing") and decoded(s) >= tokens for s in slots)


async def test_a_replica_killed_mid_answer_is_named_with_what_was_done_instead(
    replicas: list[ServerProcess], tmp_path: Path
) -> None:
    a, b = replicas
    sections = BUDGETS["specialist"].sections
    long = ModelBudget("specialist", SLOT, sum(sections.values()), 200, sections)
    # answers long enough to be killed in the middle of one
    ctx = context(replicas, tmp_path, budgets={**BUDGETS, "specialist": long})
    lost = f"replica llama-server:{a.url} failed mid-answer"

    def kill_at(event: dict) -> bool:  # a member well into its answer on `a`
        return (
            event.get("type") == "token"
            and "specialist" in event["node"]
            and generating(a, tokens=8)
        )

    # A slot's decoded tokens may still be unsent when `a` dies, so the member there failed
    # before its first token reached the council: a kill that missed, tried again.
    outs = await council_killing(
        a, QUESTION, ctx, kill_at, lambda out: any(lost in n for n in out["notes"])
    )
    for out in outs:
        every_member_answered(out)
    mid = [n for n in out["notes"] if lost in n]
    assert mid and "a council node retries it once on a live replica" in mid[0], out["notes"]
    # the retried call names the dead replica too, and where it ran instead
    left_out = [
        f for r in out["budgets"] for f in r["faults"] if f["server"] == f"llama-server:{a.url}"
    ]
    assert left_out and all(
        f["instead"] == f"the call ran on llama-server:{b.url}" for f in left_out
    )
    assert all(
        f"{r['node']}: {f['message']}" in out["notes"] for r in out["budgets"] for f in r["faults"]
    )


def test_a_replica_never_started_is_named_in_the_json_notes(
    replicas: list[ServerProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.cli import run

    a, _ = replicas
    never = f"http://127.0.0.1:{free_port()}"
    spec = json.dumps([f"llama-server:{a.url}", f"llama-server:{never}"])
    open_default_store(tmp_path / "kb.sqlite").close()
    config = tmp_path / "replicas.toml"
    config.write_text(
        f'planner = {spec}\njudge = [{spec}]\nk = 2\nretrieval = "lean"\njudge_tools = false\n'
        f"[[specialists]]\nbackend = {spec}\ncount = 2\n"
        "[output_caps]\nplanner = 16\nspecialist = 16\njudge = 16\n"
        "[budgets.planner]\nn_ctx = 2048\noutput = 16\n"
        "sections = { system = 200, kb_chunks = 100, task = 100 }\n"
        "[budgets.specialist]\nn_ctx = 2048\noutput = 16\n"
        "sections = { system = 300, kb_chunks = 300, task = 150 }\n"
        "[budgets.judge]\nn_ctx = 2048\noutput = 16\n"
        "sections = { system = 200, kb_chunks = 100, proposals = 400, task = 100 }\n"
    )
    monkeypatch.chdir(tmp_path)
    status, out, err = run(
        ["ask", QUESTION, "--config", str(config), "--kb", str(tmp_path / "kb.sqlite"), "--json"]
    )
    assert status == 0, err + out
    result = json.loads(out)
    notes = result["notes"]
    dead = f"replica llama-server:{never}"
    # before the run: the roles, the server, what failed and what the run does instead
    assert any(
        dead in n and "does not answer" in n and "the run uses the 1 of 2 replicas" in n
        for n in notes
    ), notes
    # each call that left it out says so, and where it ran
    for report in result["budgets"]:
        [fault] = report["faults"]
        assert fault["server"] == f"llama-server:{never}"
        assert "its KV pool could not be read" in fault["failed"]
        assert fault["instead"] == f"the call ran on llama-server:{a.url}"
        assert f"{report['node']}: {fault['message']}" in notes
