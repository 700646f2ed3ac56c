"""The council on a self-hosted, multi-worker Agent Server: two Aegra instances, one PostgreSQL,
one Redis (ops/agent-server/cluster.py), driven by the official `langgraph_sdk` client.

The council's models are a real HTTP server of fixed latency with scripted answers
(scripted_openai.py): what is tested is the serving (queue, leases, streams, cancellation,
store), not the answers. `make agent-server-test` creates the server's own Python 3.12
environment and runs this file; without it (`COLLECTIVE_AGENT_SERVER_PYTHON` unset) the tests
are skipped, so `make test` does not pay for the environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from collective.verdict.agreement import NO_ANSWER
from tests.agent_server.scripted_openai import ScriptedOpenAIServer

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "ops" / "agent-server" / "cluster.py"
SERVER_PYTHON = os.environ.get("COLLECTIVE_AGENT_SERVER_PYTHON", "")

pytestmark = [
    pytest.mark.skipif(
        not SERVER_PYTHON, reason="needs the Agent Server environment: make agent-server-test"
    ),
    pytest.mark.timeout(600),
]

# Short leases, so that a killed instance's run is taken over within seconds (Aegra's defaults:
# a 30 s lease, a 15 s reaper).
FAST_RECOVERY = {
    "LEASE_DURATION_SECONDS": "6",
    "HEARTBEAT_INTERVAL_SECONDS": "2",
    "REAPER_INTERVAL_SECONDS": "2",
}
STREAM = ["values", "messages-tuple", "custom"]


class Deployment:
    """The running cluster: its instances' URLs, its database, and `kill` / `restart`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _run(self, *args: str) -> str:
        out = subprocess.run(
            [SERVER_PYTHON, str(CLUSTER), *args, "--dir", str(self.root)],
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert out.returncode == 0, f"cluster.py {' '.join(args)}: {out.stdout}{out.stderr}"
        return out.stdout

    @property
    def state(self) -> dict[str, Any]:
        return dict(json.loads((self.root / "cluster.json").read_text()))

    def url(self, name: str) -> str:
        return str(self.state["instances"][name])

    def client(self, name: str) -> Any:
        return get_client(url=self.url(name), timeout=120)

    def kill(self, name: str) -> None:
        self._run("kill", name)

    def restart(self, name: str) -> None:
        self._run("restart", name)

    def holder(self, run_id: str) -> str | None:
        """The instance whose worker holds `run_id`'s lease now (None: nobody)."""
        import psycopg

        with psycopg.connect(self.state["database_url"]) as conn:
            row = conn.execute(
                "SELECT claimed_by FROM runs WHERE run_id = %s", (run_id,)
            ).fetchone()
        if not row or not row[0]:
            return None
        pids = {str(p["pid"]): n for n, p in self.state["processes"].items()}
        return next((n for pid, n in pids.items() if f"-{pid}-worker-" in row[0]), None)

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.state["database_url"]) as conn:
            return list(conn.execute(query, args).fetchall())


@pytest.fixture(scope="module")
def models() -> Any:
    server = ScriptedOpenAIServer(latency_s=0.3).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("agent-server")
    env_args = [a for k, v in FAST_RECOVERY.items() for a in ("--env", f"{k}={v}")]
    deployment = Deployment(root)
    deployment._run("start", "--instances", "2", *env_args)
    try:
        yield deployment
    finally:
        pids = [p["pid"] for p in deployment.state["processes"].values()]
        deployment._run("stop")
        assert not (root / "cluster.json").exists()
        assert not [pid for pid in pids if alive(pid)], "cluster.py stop left processes"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # PostgreSQL runs as its own user
        return True
    return True


def context(models: ScriptedOpenAIServer, user: str, **extra: Any) -> dict[str, Any]:
    """The run's context: three specialists on the scripted server, lexical retrieval."""
    return {
        "k": 3,
        "planner": models.spec("planner"),
        "judge": models.spec("judge"),
        "specialists": [{"backend": models.spec("specialist"), "count": 3}],
        "judge_tools": False,
        "kb_embeddings": "none",
        "user_id": user,
        **extra,
    }


def tagged(question: str) -> str:
    """`question` with a word no other run uses, to find this run's prompts on the server."""
    return f"{question} (ref {uuid.uuid4().hex[:10]})"


async def wait_for(predicate: Any, timeout: float = 120.0, what: str = "") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(what or "condition")
        await asyncio.sleep(0.05)


async def collect(stream: Any) -> dict[str, list[Any]]:
    parts: dict[str, list[Any]] = {}
    async for part in stream:
        parts.setdefault(part.event, []).append(part.data)
    return parts


async def test_both_instances_serve_the_schemas_as_langgraph_dev(cluster):
    for name in ("A", "B"):
        client = cluster.client(name)
        (assistant,) = await client.assistants.search(graph_id="collective")
        schemas = await client.assistants.get_schemas(assistant["assistant_id"])
        assert schemas["input_schema"]["required"] == ["question"]
        assert {"answer", "citations", "proposals", "budgets"} <= set(
            schemas["output_schema"]["properties"]
        )
        ctx = schemas["context_schema"]["properties"]
        assert {"k", "judge", "specialists", "budgets", "user_id", "memory_scope"} <= set(ctx)


async def test_a_run_started_on_a_streams_there_and_is_joined_from_b(cluster, models):
    a, b = cluster.client("A"), cluster.client("B")
    thread = await a.threads.create()
    tid = thread["thread_id"]
    models.latency_s = 1.0  # long enough to join while the members run
    try:
        run = await a.runs.create(
            tid,
            "collective",
            input={"question": tagged("PLA in a hot car?")},
            context=context(models, "joiner"),
            stream_mode=STREAM,
        )
        on_a, on_b = await asyncio.gather(
            collect(a.runs.join_stream(tid, run["run_id"], stream_mode=STREAM)),
            collect(b.runs.join_stream(tid, run["run_id"], stream_mode=STREAM)),
        )
    finally:
        models.latency_s = 0.3
    for parts in (on_a, on_b):
        assert parts.get("values") and parts["values"][-1].get("answer"), parts.keys()
        final = parts["values"][-1]
        # in the order the calls finished: the judge drafts beside the specialists
        assert sorted(x["node"] for x in final["budgets"]) == [
            "judge",
            "plan",
            "specialist-1",
            "specialist-2",
            "specialist-3",
        ]
        # the council's own progress events and the judge's tokens, as under langgraph dev
        assert any(e.get("node") == "judge" for e in parts["custom"] if isinstance(e, dict)), parts[
            "custom"
        ][:5]
        judge_tokens = [m for m, meta in parts["messages"] if meta.get("agent") == "judge"]
        assert len(judge_tokens) > 1
        assert "".join(m["content"] for m in judge_tokens).strip().endswith(final["answer"])
    state = await b.threads.get_state(tid)
    assert state["values"]["answer"] == on_a["values"][-1]["answer"]
    # checkpoints live in the shared PostgreSQL database
    rows = cluster.sql("SELECT count(*) FROM checkpoints WHERE thread_id = %s", tid)
    assert rows[0][0] >= 5


async def test_a_thread_remembers_its_first_turn_from_the_other_instance(cluster, models):
    a, b = cluster.client("A"), cluster.client("B")
    tid = (await a.threads.create())["thread_id"]
    first = tagged("Which filament for a dashboard mount?")
    await a.runs.wait(tid, "collective", input={"question": first}, context=context(models, "u1"))
    second = tagged("And for a mount outdoors?")
    out = await b.runs.wait(
        tid, "collective", input={"question": second}, context=context(models, "u1")
    )
    assert out["answer"]
    ref = first.rsplit("ref ", 1)[1].rstrip(")")
    later = [m for m in models.asked(second.rsplit("ref ", 1)[1].rstrip(")"))]
    assert "planner" in later
    # the second run's planner and specialists were shown the first question
    assert set(models.asked(ref)) >= {"planner", "specialist"}
    assert len(models.asked(ref)) > len(later) // 2


async def test_a_killed_instance_s_run_finishes_on_the_other_without_rerunning_done_nodes(
    cluster, models
):
    a = cluster.client("A")
    tid = (await a.threads.create())["thread_id"]
    question = tagged("Does PETG survive a hot car?")
    ref = question.rsplit("ref ", 1)[1].rstrip(")")
    # one quick member (done in 0.4 s), two slow ones (4 s): the kill falls between
    ctx = context(models, "crash")
    ctx["specialists"] = [
        {"backend": models.spec("quick-specialist"), "count": 1},
        {"backend": models.spec("specialist"), "count": 2},
    ]
    models.latency_s = 4.0
    holder = None
    try:
        run = await a.runs.create(tid, "collective", input={"question": question}, context=ctx)
        run_id = run["run_id"]
        await wait_for(
            lambda: (
                "quick-specialist" in models.finished(ref)
                and models.asked(ref).count("specialist") == 2
            ),
            what="the quick member done, the slow ones in flight",
        )
        holder = cluster.holder(run_id)
        assert holder in ("A", "B"), holder
        await asyncio.sleep(0.5)  # the quick member's result reaches its checkpoint
        cluster.kill(holder)  # SIGKILL while two specialists run
        survivor = cluster.client("B" if holder == "A" else "A")
        models.latency_s = 0.3
        result = await asyncio.wait_for(survivor.runs.join(tid, run_id), 180)
        status = (await survivor.runs.get(tid, run_id))["status"]
    finally:
        models.latency_s = 0.3
        if holder:
            cluster.restart(holder)
    assert status == "success", status
    assert result.get("answer"), result
    asked = models.asked(ref)
    # Aegra re-ran the run under its run id; LangGraph resumed it from the thread's checkpoint:
    # the plan and the quick member, done before the kill, were not asked again
    assert asked.count("planner") == 1, asked
    assert asked.count("quick-specialist") == 1, asked
    # the judge's draft runs beside the members: asked again only if the kill cut it short
    assert asked.count("specialist") == 4 and asked.count("judge") in (1, 2), asked
    assert sorted(b["node"] for b in result["budgets"]) == [
        "judge",
        "plan",
        "specialist-1",
        "specialist-2",
        "specialist-3",
    ]


async def test_a_run_cancelled_from_the_other_instance_frees_its_model_slots(cluster, models):
    a, b = cluster.client("A"), cluster.client("B")
    tid = (await a.threads.create())["thread_id"]
    question = tagged("Is ABS fine in a hot car?")
    ref = question.rsplit("ref ", 1)[1].rstrip(")")
    dropped = models.dropped
    models.latency_s = 20.0
    try:
        run = await a.runs.create(
            tid, "collective", input={"question": question}, context=context(models, "cancel")
        )

        def started() -> bool:  # the three members and the judge's draft beside them
            asked = models.asked(ref)
            return asked.count("specialist") >= 3 and "judge" in asked

        await wait_for(started, what="the members and the draft")
        await b.runs.cancel(tid, run["run_id"], wait=True)
        # every HTTP call was closed: the slots are free long before 20 s of answer
        await wait_for(lambda: models.in_flight == 0, 15, "model calls still open")
    finally:
        models.latency_s = 0.3
    assert models.dropped - dropped >= 4
    assert (await a.runs.get(tid, run["run_id"]))["status"] in ("interrupted", "error")
    assert models.asked(ref).count("judge") == 1  # its draft, closed: no verdict after


async def test_two_users_memories_never_meet(cluster, models):
    a, b = cluster.client("A"), cluster.client("B")
    secret = f"QUOKKA{uuid.uuid4().hex[:8].upper()}"
    small = {"l0_capacity": 200, "l1_capacity": 300, "memory_scope": "user"}
    tid = (await a.threads.create())["thread_id"]
    for i in range(12):  # until L1 overflows into the long-term store
        question = f"Run {i}: my enclosure {secret} sits in a hot car; which filament?"
        await a.runs.wait(
            tid,
            "collective",
            input={"question": question},
            context=context(models, "xena", **small),
        )
        if cluster.sql("SELECT 1 FROM store WHERE prefix LIKE 'collective.memory.xena.%%'"):
            break
    stored = cluster.sql(
        "SELECT prefix, value::text FROM store WHERE value::text LIKE %s", f"%{secret}%"
    )
    assert stored and all(p.startswith("collective.memory.xena.") for p, _ in stored), stored

    # Yusuf, on the other instance, with the same scope: nothing of Xena's reaches a prompt
    before = len(models.asked(secret))
    tid_y = (await b.threads.create())["thread_id"]
    await b.runs.wait(
        tid_y,
        "collective",
        input={"question": "Which filament for a hot car enclosure?"},
        context=context(models, "yusuf", **small),
    )
    assert len(models.asked(secret)) == before
    # Xena's new thread, from the other instance, recalls it from the shared store
    tid_x2 = (await b.threads.create())["thread_id"]
    await b.runs.wait(
        tid_x2,
        "collective",
        input={"question": "Which filament for a hot car enclosure?"},
        context=context(models, "xena", **small),
    )
    assert len(models.asked(secret)) > before


@pytest.fixture(scope="module")
def real_model() -> Any:
    """The Ollama-protocol server backed by the real gemma 270M in this process's environment."""
    pytest.importorskip("llama_cpp", reason="the real model path needs the project's .venv")
    import socket

    import httpx

    from collective.models.embedded import embedded_model_path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, str(REPO / "tests" / "integration" / "ollama_protocol_server.py")]
    argv += ["--port", str(port), "--model-name", "gemma3:270m", "--context-length", "8192"]
    argv += ["--default-num-ctx", "4096", "--model", str(embedded_model_path())]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/api/version", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, "the Ollama-protocol server exited"
            time.sleep(0.2)
        yield f"ollama:gemma3:270m@{url}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_the_real_model_s_tokens_stream_through_the_agent_server(cluster, real_model):
    """The smallest real model behind the council: its verdict streams token by token from B."""
    a, b = cluster.client("A"), cluster.client("B")
    tid = (await a.threads.create())["thread_id"]
    ctx = {
        "k": 1,
        "planner": real_model,
        "judge": real_model,
        "specialists": [{"backend": real_model, "count": 1}],
        "judge_tools": False,
        "kb_embeddings": "none",
        "temperature": 0.0,
        "output_caps": {"planner": 32, "specialist": 48, "judge": 48},
        "user_id": "real",
    }
    run = await a.runs.create(
        tid,
        "collective",
        input={"question": "Is PLA a good choice for a part in a hot car?"},
        context=ctx,
        stream_mode=STREAM,
    )
    parts = await collect(b.runs.join_stream(tid, run["run_id"], stream_mode=STREAM))
    final = parts["values"][-1]
    assert final.get("answer"), parts.get("error") or final
    nodes = [x["node"] for x in final["budgets"]]
    assert nodes[0] == "plan" and {"specialist-1", "judge"} <= set(nodes)
    judge = [m["content"] for m, meta in parts["messages"] if meta.get("agent") == "judge"]
    assert len(judge) > 1, "the verdict did not stream"
    fixed = final["claim_check"]["draft_support"] not in (None, 1.0)  # a fix streams after
    # the verdict's direct answer is the streamed draft's, cleaned, unless a member's answer
    # stood instead of it or nothing stood (a 270M base model's draft is often its prompt,
    # cleaned away); the chunks' own lines follow it
    ruled = final["claim_check"]["selected"] == "judge" and final["answer"] != NO_ANSWER
    direct = final["answer"].splitlines()[0].split(" [KB#")[0]
    assert direct in "".join(judge) or fixed or not ruled, judge
