"""One council process against PostgreSQL, for tests/integration/test_postgres.py.

`python -m tests.integration.pg_council URL THREAD MODE [USER]` opens the checkpointer and the
store at URL the way the CLI does (`collective.memory.store`) and runs the council with
scripted backends (the crash is the point, not the answers). MODE:

- `crash`: the process dies (`os._exit(3)`) inside the judge's model call;
- `resume`: resumes THREAD's unfinished run;
- `ask`: asks two questions on THREAD;
- `fill`: asks until L1 overflows into the L2 store.

Prints one JSON line: the answer, the calls each role's backend got, the thread's L2 keys.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from contextlib import AsyncExitStack

from collective.graph import CouncilContext, build_graph
from collective.kb.store import Chunk
from collective.memory.store import open_checkpointer, open_store
from tests.fakes import ListStore, ScriptedBackend

CHUNKS = [
    Chunk(
        "mem_asa",
        "ASA keeps its shape to about 95 C.",
        "asa.md",
        (),
        0.9,
        heading="ASA filament > Heat",
    )  # fmt: skip
]


def die(messages):
    sys.stdout.flush()
    os._exit(3)


async def main(url: str, thread: str, mode: str, user: str) -> None:
    planner = ScriptedBackend("planner", "Specialist 1: heat.")
    specialist = ScriptedBackend("spec", "Use ASA [KB#mem_asa].")
    # the judge drafts beside the specialists: it dies once they have finished
    crash = {"reply": die, "latency_s": 2.0} if mode == "crash" else {"reply": "ASA [KB#mem_asa]"}
    judge = ScriptedBackend("judge", **crash)
    small = {"l0_capacity": 200, "l1_capacity": 300} if mode == "fill" else {}
    ctx = CouncilContext(
        k=2,
        planner=planner,
        specialists=[specialist],
        judge=judge,
        knowledge=ListStore(CHUNKS),
        retrieval="balanced",
        user_id=user,
        **small,
    )
    config = {"configurable": {"thread_id": thread}}
    async with AsyncExitStack() as stack:
        saver = await open_checkpointer(url, stack)
        store = await open_store(url, stack)
        council = build_graph(checkpointer=saver, store=store)
        namespace = ("collective", "memory", user, thread)
        out: dict = {}
        if mode == "resume":
            out = await council.ainvoke(None, config, context=ctx, durability="sync")
        elif mode in ("crash", "ask"):
            for i in range(1 if mode == "crash" else 2):
                # the thread's label ("t1") is context, not a thing asked about
                question = f"Question {i} on {thread}: which filament for a hot car?"
                out = await council.ainvoke(
                    {"question": question}, config, context=ctx, durability="sync"
                )
        else:
            for i in range(12):
                question = f"Run {i}: does the part warp in a hot car?"
                out = await council.ainvoke({"question": question}, config, context=ctx)
                if await store.asearch(namespace):
                    break
        l2 = [item.key for item in await store.asearch(namespace, limit=100)]
        state = await council.aget_state(config)
        print(
            json.dumps(
                {
                    "answer": out.get("answer"),
                    "calls": {
                        "planner": len(planner.calls),
                        "specialist": len(specialist.calls),
                        "judge": len(judge.calls),
                    },
                    "l2": l2,
                    "next": list(state.next),
                    "questions": len(state.values.get("memory", {}).get("turns", [])) // 2,
                }
            )
        )


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(args[0], args[1], args[2], args[3] if len(args) > 3 else "alice"))
