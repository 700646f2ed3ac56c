"""Whole councils on one real llama-server started the way users start it (issue 16).

`llama-server -m MODEL -c 8192` (no `-np`: four slots over ONE 8,192-token KV pool) runs a K=3
council, and `-c 4096 -np 5 --kv-unified` (five slots over one 4,096-token pool) a K=5 one: the
council graph as `collective ask` and embedders run it (`build_graph`, backends named by spec),
every role on that one server, over a SQLite KB of single huge chunks that fill every
specialist's KB section. Together the specialists' prompts outgrow the pool (K=3: about 2,800
tokens each, two fit at once; K=5: about 900 each, four fit), so admission control must hold
some back; without it llama.cpp fails every active request with HTTP 500 `Context size has been
exceeded.` (measured in tests/integration/test_pool_llama_server.py).

Asserted: every specialist answers; the server sent no error (its log has no `send_error`: no
HTTP 500 or 400); and the reservations in flight, replayed from admission control's log
(`KV_LOG_FIELD`), never exceed the pool at any moment, each specialist's reservation being its
budget report's prompt + output tokens. Outputs are 16 tokens and the planner's and judge's
prompts small; the K=5 pool is 4,096 rather than 8,192 tokens to halve the prompt processing on
two shared cores (the arithmetic, K x reservation > pool, is the same).
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pytest
from conftest import serve_llama_server
from langgraph.checkpoint.memory import InMemorySaver

from collective.budget.plans import ModelBudget
from collective.graph import CouncilContext, build_graph
from collective.kb.sqlite_store import SqliteKnowledgeStore
from collective.models.admission import KV_LOG_FIELD
from collective.models.registry import backend_from_spec

pytestmark = pytest.mark.integration

QUESTION = "What does aspirin do to the COX enzymes?"
OUTPUT = 16


def budgets(pool: int, kb_chunks: int) -> dict[str, ModelBudget]:
    """Plans made for the server's `pool`: specialists with a `kb_chunks` KB section."""
    return {
        "specialist": ModelBudget(
            name="specialist",
            n_ctx=pool,
            prompt_budget=kb_chunks + 500,
            output_budget=OUTPUT,
            sections={"system": 300, "kb_chunks": kb_chunks, "task": 200},
        ),
        "planner": ModelBudget(
            name="planner",
            n_ctx=pool,
            prompt_budget=320,
            output_budget=OUTPUT,
            sections={"system": 160, "kb_chunks": 60, "task": 100},
        ),
        "judge": ModelBudget(
            name="judge",
            n_ctx=pool,
            prompt_budget=720,
            output_budget=OUTPUT,
            sections={"system": 160, "kb_chunks": 60, "proposals": 400, "task": 100},
        ),
    }


def huge_chunk_kb(tmp_path: Path) -> str:
    """A SQLite KB holding two chunks of about 6,000 tokens each.

    `kb add` bounds a chunk's size since issue 28, so these are written as a KB made before that
    holds them (one chunk per note, no vectors): counting and trimming must cope with such KBs.
    """
    notes = {
        "aspirin.md": "aspirin note {i}: acetylsalicylic acid irreversibly inhibits the COX "
        "enzymes, so prostaglandin synthesis falls",
        "aspirin-dose.md": "aspirin dose note {i}: low dose aspirin blocks the COX enzymes of "
        "platelets for their whole life",
    }
    path = tmp_path / "kb.sqlite"
    with SqliteKnowledgeStore(path, embedder=None) as store:
        for n, (name, note) in enumerate(notes.items()):
            text = "; ".join(note.format(i=i) for i in range(300))
            store._db.execute(
                "INSERT INTO chunks(id, source, heading, text, tags, position)"
                " VALUES (?,?,?,?,?,?)",
                (f"mem_{n:020d}", name, "", text, "", 0),
            )
        store._db.commit()
        assert store.count() == len(notes)  # single huge chunks
    return str(path)


def replay(events: list[dict]) -> list[int]:
    """The tokens in flight after each admission or release, replayed from the log."""
    held: Counter[str] = Counter()
    in_flight = []
    for event in events:
        if event["event"] == "admit":
            held[event["label"]] += event["tokens"]
        elif event["event"] == "release":
            held[event["label"]] -= event["tokens"]
        else:
            continue
        in_flight.append(sum(held.values()))
        assert in_flight[-1] == event["in_flight"]  # the log agrees with admission's books
    assert not +held, "every reservation was released"
    return in_flight


@pytest.mark.timeout(900)  # prompt processing on two shared cores
@pytest.mark.parametrize(
    ("k", "pool", "kb_chunks", "started"),
    [
        (3, 8192, 2_300, ("-c", "8192")),
        (5, 4096, 400, ("-c", "4096", "-np", "5", "--kv-unified")),
    ],
    ids=["default-no-np-K3", "kv-unified-K5"],
)
async def test_every_specialist_answers_within_the_servers_one_pool(
    k: int,
    pool: int,
    kb_chunks: int,
    started: tuple[str, ...],
    llama_server_binary: str,
    gguf_path: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="collective.models.admission")
    server = serve_llama_server(llama_server_binary, gguf_path, *started, name=f"council-k{k}")
    spec = f"llama-server:{server.url}"
    ctx = CouncilContext(
        k=k,
        planner=spec,
        specialists=(spec,),
        judge=spec,
        judge_tools=False,
        kb=huge_chunk_kb(tmp_path),
        retrieval="balanced",
        budgets=budgets(pool, kb_chunks),
        temperature=0.0,
    )
    try:
        read = await backend_from_spec(spec).pool()
        out = await build_graph(checkpointer=InMemorySaver()).ainvoke(
            {"question": QUESTION}, {"configurable": {"thread_id": "pool"}}, context=ctx
        )
    finally:
        await backend_from_spec(spec).aclose()
        server.stop()
    log = server.log.read_text(errors="replace")
    assert f"n_ctx_slot = {pool}, kv_unified = 'true'" in log  # the server's own word: one pool
    assert read.unified and read.tokens == pool and read.slots == (4 if k == 3 else 5)

    # Every specialist answered; the server sent no error (HTTP 500 or 400) to anyone.
    assert [p["member"] for p in out["proposals"]] == [f"specialist-{i}" for i in range(1, k + 1)]
    assert all(p["error"] is None and p["text"].strip() for p in out["proposals"])
    assert [line for line in log.splitlines() if "send_error" in line] == []
    assert not any("PoolExhausted" in n or "Unavailable" in n for n in out.get("notes", []))
    assert out["answer"].strip()

    # Each specialist's KB section was filled (its huge chunk trimmed to it).
    reports = {b["node"]: b for b in out["budgets"] if b["node"].startswith("specialist-")}
    assert len(reports) == k
    for report in reports.values():
        kb = next(s for s in report["sections"] if s["name"] == "kb_chunks")
        assert kb["trimmed"] and kb["used"] > 0.9 * kb["allocated"]
        assert report["fits"] and report["n_ctx"] == pool
    reserved = {n: r["prompt_tokens"] + r["max_output_tokens"] for n, r in reports.items()}
    assert sum(reserved.values()) > pool  # together the specialists outgrow the pool...

    # ...so admission held some back, and the reservations in flight (its log, replayed) never
    # exceeded the pool, each specialist holding exactly what its budget report says.
    events = [
        getattr(r, KV_LOG_FIELD)
        for r in caplog.records
        if getattr(r, KV_LOG_FIELD, {}).get("server") == read.server
    ]
    admitted = {e["label"]: e["tokens"] for e in events if e["event"] == "admit"}
    assert {n: admitted[n] for n in reserved} == reserved
    assert {"plan", "judge"} <= admitted.keys()  # the whole council went through admission
    in_flight = replay(events)
    assert max(in_flight) <= pool and all(e["pool"] == pool for e in events)
    assert any(e["event"] == "wait" and e["label"].startswith("specialist-") for e in events)
    assert max(in_flight) > max(reserved.values())  # several at once: not one at a time
