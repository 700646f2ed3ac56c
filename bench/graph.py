"""Benchmark: the council graph's own cost, measured against its critical path and bare LangGraph.

1. Fixed-latency backends (planner 50 ms, specialists 100-300 ms, judge 200 ms), K = 3, 5, 8:
   wall time / (planner + slowest specialist + judge). Specialists run concurrently, so the goal
   is <= 1.05.
2. Zero-latency backends: a council run / a bare LangGraph graph of the same shape (retrieve ->
   plan -> Send fan-out to K no-op nodes -> quorum -> judge -> remember, every node a no-op).
   Goal <= 2.0.
3. The peer-review round: wall time with `review=True` / without, same fixed-latency backends.

Ratios are medians of repeated runs in one process; never compare absolute times across runs.
"""

from __future__ import annotations

import asyncio
import operator
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Send  # noqa: E402

from collective.graph import CouncilContext, build_graph  # noqa: E402
from tests.fakes import ScriptedBackend  # noqa: E402

REPLY = "ASA or PETG: ASA keeps its shape in a hot car. [KB#mem_x]"


def fixed_context(k: int, kb_path: str, *, latency: bool, review: bool = False) -> CouncilContext:
    def backend(name: str, seconds: float) -> ScriptedBackend:
        return ScriptedBackend(name, REPLY, latency_s=seconds if latency else 0.0)

    specialist_latency = [0.1 + 0.2 * i / max(1, k - 1) for i in range(k)]  # 100..300 ms
    return CouncilContext(
        k=k,
        planner=backend("planner", 0.05),
        specialists=[backend(f"s{i}", s) for i, s in enumerate(specialist_latency)],
        judge=backend("judge", 0.2),
        kb=kb_path,
        retrieval="balanced",
        review=review,
    )


class Bare(TypedDict, total=False):
    question: str
    out: Annotated[list[str], operator.add]


def bare_graph():
    def noop(state):
        return {}

    def member(state):
        return {"out": ["x"]}

    builder = StateGraph(Bare)
    for name in ("retrieve", "plan", "quorum", "judge", "remember"):
        builder.add_node(name, noop)
    builder.add_node("specialist", member)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "plan")
    builder.add_conditional_edges(
        "plan", lambda s: [Send("specialist", s) for _ in range(K_BARE)], ["specialist"]
    )
    builder.add_edge("specialist", "quorum")
    builder.add_conditional_edges("quorum", lambda s: "judge", ["judge"])
    builder.add_edge("judge", "remember")
    builder.add_edge("remember", END)
    return builder.compile()


K_BARE = 3


async def timed(graph, ctx=None, repeats: int = 5) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        await graph.ainvoke({"question": "Which filament survives a hot car?"}, context=ctx)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


async def main() -> None:
    global K_BARE
    kb_path = str(Path(tempfile.mkdtemp()) / "kb.sqlite")
    council = build_graph()
    await timed(council, fixed_context(3, kb_path, latency=False), repeats=2)  # warm caches

    print("1. fixed latency: wall / (planner + slowest specialist + judge), goal <= 1.05")
    for k in (3, 5, 8):
        wall = await timed(council, fixed_context(k, kb_path, latency=True))
        critical = 0.05 + 0.3 + 0.2
        print(
            f"   K={k}: wall {wall * 1000:.0f} ms, critical path {critical * 1000:.0f} ms, "
            f"ratio {wall / critical:.3f}"
        )

    print("2. zero latency: council / bare LangGraph graph of the same shape, goal <= 2.0")
    for profile in ("lean", "balanced"):
        for k in (3, 5, 8):
            K_BARE = k
            bare = bare_graph()
            ctx = fixed_context(k, kb_path, latency=False)
            ctx.retrieval = profile
            await timed(bare, repeats=3)
            await timed(council, ctx, repeats=3)
            # Interleaved, so both see the same machine load.
            pairs = [
                (await timed(bare, repeats=1), await timed(council, ctx, repeats=1))
                for _ in range(60)
            ]
            b = statistics.median(p[0] for p in pairs)
            c = statistics.median(p[1] for p in pairs)
            print(
                f"   retrieval={profile} K={k}: council {c * 1000:.1f} ms, bare "
                f"{b * 1000:.1f} ms, ratio {c / b:.2f}"
            )

    print("3. peer-review round: wall with review / without (fixed latency, K=3)")
    without = await timed(council, fixed_context(3, kb_path, latency=True))
    with_review = await timed(council, fixed_context(3, kb_path, latency=True, review=True))
    print(
        f"   without {without * 1000:.0f} ms, with {with_review * 1000:.0f} ms, "
        f"ratio {with_review / without:.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
