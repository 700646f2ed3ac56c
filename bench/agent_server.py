"""The council on two Aegra instances (PostgreSQL + Redis): runs that survive a killed instance,
and the latency the server path adds to calling the graph in process.

    make agent-server-bench [BENCH_ARGS="--kill-runs 20 --latency-runs 30 --latency 0.2"]

Both paths run the same graph with the same JSON context against the same scripted model
server of fixed latency (tests/agent_server/scripted_openai.py, real HTTP): k = 3, every
model call `--latency` seconds. In process: `collective.graph.build_graph` with LangGraph's
PostgreSQL checkpointer and store on the cluster's own database (so only the serving differs),
`ainvoke` on a fresh thread. Server: `threads.create` + `runs.stream` until its end event, through
langgraph_sdk, alternating instances; and the same with `runs.wait`. Killed: each run is started
on a random instance; once its three specialists are in flight the instance that holds it is
SIGKILLed, the run is joined from the other, and the killed one is restarted before the next.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.agent_server.scripted_openai import ScriptedOpenAIServer  # noqa: E402

CLUSTER = REPO / "ops" / "agent-server" / "cluster.py"
FAST_RECOVERY = {
    "LEASE_DURATION_SECONDS": "6",
    "HEARTBEAT_INTERVAL_SECONDS": "2",
    "REAPER_INTERVAL_SECONDS": "2",
}


def cluster(python: str, root: Path, *args: str) -> None:
    out = subprocess.run(
        [python, str(CLUSTER), *args, "--dir", str(root)], capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(f"cluster.py {' '.join(args)} failed:\n{out.stdout}{out.stderr}")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def context(models: ScriptedOpenAIServer) -> dict[str, Any]:
    return {
        "k": 3,
        "planner": models.spec("planner"),
        "judge": models.spec("judge"),
        "specialists": [{"backend": models.spec("specialist"), "count": 3}],
        "judge_tools": False,
        "kb_embeddings": "none",
        "user_id": "bench",
    }


async def in_process(url: str, ctx: dict[str, Any], runs: int) -> list[float]:
    from contextlib import AsyncExitStack

    from collective.graph import build_graph
    from collective.memory.store import open_checkpointer, open_store

    walls = []
    async with AsyncExitStack() as stack:
        graph = build_graph(
            checkpointer=await open_checkpointer(url, stack), store=await open_store(url, stack)
        )
        for i in range(runs + 1):
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            start = time.perf_counter()
            out = await graph.ainvoke(
                {"question": f"Run {i}: PLA in a hot car?"}, config, context=ctx
            )
            assert out.get("answer"), out
            if i:  # the first warms the connections and the KB
                walls.append(time.perf_counter() - start)
    return walls


async def served(urls: list[str], ctx: dict[str, Any], runs: int, via: str) -> list[float]:
    """`via` "stream": `runs.stream` until its end event; "wait": `runs.wait`."""
    from langgraph_sdk import get_client

    clients = [get_client(url=u, timeout=120) for u in urls]
    walls = []
    for i in range(runs + len(clients)):
        client = clients[i % len(clients)]
        start = time.perf_counter()
        thread = await client.threads.create()
        question = {"question": f"Run {i}: PLA in a hot car?"}
        if via == "wait":
            out = await client.runs.wait(
                thread["thread_id"], "collective", input=question, context=ctx
            )
        else:
            async for part in client.runs.stream(
                thread["thread_id"], "collective", input=question, context=ctx
            ):
                if part.event == "values":
                    out = part.data
        assert isinstance(out, dict) and out.get("answer"), out
        if i >= len(clients):  # one warm-up per instance
            walls.append(time.perf_counter() - start)
    return walls


async def killed(python: str, root: Path, models: ScriptedOpenAIServer, runs: int) -> list[dict]:
    import psycopg
    from langgraph_sdk import get_client

    results = []
    for i in range(runs):
        state = json.loads((root / "cluster.json").read_text())
        names = sorted(state["instances"])
        started_on = random.choice(names)
        client = get_client(url=state["instances"][started_on], timeout=120)
        ref = uuid.uuid4().hex[:10]
        thread = await client.threads.create()
        tid = thread["thread_id"]
        models.latency_s = 3.0
        run = await client.runs.create(
            tid,
            "collective",
            input={"question": f"Kill {i}: PETG in a hot car? ({ref})"},
            context=context(models),
        )
        deadline = time.monotonic() + 120
        while models.asked(ref).count("specialist") < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        with psycopg.connect(state["database_url"]) as conn:
            row = conn.execute(
                "SELECT claimed_by FROM runs WHERE run_id = %s", (run["run_id"],)
            ).fetchone()
        holder = next(
            n for n in names if row and row[0] and f"-{state['processes'][n]['pid']}-" in row[0]
        )
        cluster(python, root, "kill", holder)
        killed_at = time.perf_counter()
        models.latency_s = 0.2
        survivor = next(n for n in names if n != holder)
        other = get_client(url=state["instances"][survivor], timeout=120)
        try:
            await asyncio.wait_for(other.runs.join(tid, run["run_id"]), 180)
            status = (await other.runs.get(tid, run["run_id"]))["status"]
        except Exception as exc:  # noqa: BLE001 - a lost run is a result here
            status = f"lost: {type(exc).__name__}"
        asked = models.asked(ref)
        results.append(
            {
                "status": status,
                "started_on": started_on,
                "killed": holder,
                "recovered_s": round(time.perf_counter() - killed_at, 1),
                "planner_calls": asked.count("planner"),
            }
        )
        print(json.dumps(results[-1]), flush=True)
        cluster(python, root, "restart", holder)
    return results


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill-runs", type=int, default=20)
    parser.add_argument("--latency-runs", type=int, default=30)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    args = parser.parse_args()
    python = os.environ.get("COLLECTIVE_AGENT_SERVER_PYTHON")
    if not python:
        raise SystemExit("set COLLECTIVE_AGENT_SERVER_PYTHON (make agent-server-bench does)")
    models = ScriptedOpenAIServer(latency_s=args.latency).start()
    root = Path(tempfile.mkdtemp(prefix="collective-agent-server-bench-"))
    env = [a for k, v in FAST_RECOVERY.items() for a in ("--env", f"{k}={v}")]
    cluster(python, root, "start", "--instances", "2", *env)
    try:
        state = json.loads((root / "cluster.json").read_text())
        ctx = context(models)
        local = await in_process(state["database_url"], ctx, args.latency_runs)
        urls = list(state["instances"].values())
        remote = await served(urls, ctx, args.latency_runs, "stream")
        waited = await served(urls, ctx, args.latency_runs, "wait")
        report: dict[str, Any] = {"latency_per_call_s": args.latency, "load": os.getloadavg()}
        for name, walls in (("in_process", local), ("server", remote), ("server_wait", waited)):
            report[name] = {
                "runs": len(walls),
                "p50_s": round(pct(walls, 0.5), 3),
                "p95_s": round(pct(walls, 0.95), 3),
                "mean_s": round(statistics.mean(walls), 3),
            }
        report["added_p50_s"] = round(report["server"]["p50_s"] - report["in_process"]["p50_s"], 3)
        report["added_p95_s"] = round(report["server"]["p95_s"] - report["in_process"]["p95_s"], 3)
        report["added_p50_wait_s"] = round(
            report["server_wait"]["p50_s"] - report["in_process"]["p50_s"], 3
        )
        print(json.dumps(report), flush=True)
        models.latency_s = args.latency
        results = await killed(python, root, models, args.kill_runs)
        done = sum(r["status"] == "success" for r in results)
        replanned = sum(r["planner_calls"] > 1 for r in results)
        recovered = sorted(r["recovered_s"] for r in results if r["status"] == "success")
        print(
            json.dumps(
                {
                    "killed_runs": len(results),
                    "completed": done,
                    "replanned": replanned,
                    "recovery_p50_s": pct(recovered, 0.5) if recovered else None,
                    "recovery_max_s": recovered[-1] if recovered else None,
                    "load": os.getloadavg(),
                }
            )
        )
    finally:
        cluster(python, root, "stop")
        shutil.rmtree(root, ignore_errors=True)
        models.stop()


if __name__ == "__main__":
    asyncio.run(main())
