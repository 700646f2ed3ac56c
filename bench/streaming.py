"""Time to the first verdict token against time to the whole verdict, on the embedded default.

Runs the council (the embedded default backends, in process) with LangGraph's `messages` and
`values` stream modes, and times from the start of the run:

* the judge's first token (what a user streaming the verdict waits for);
* the judge's last token (what a user of a non-streaming client waits for: the verdict is only
  whole then), and the end of the run;
* the judge's own time to first token (its `judge_ttft_ms` timing: prompt assembly, counting
  and prompt processing) against its whole call.

Prints each run and the medians. Run: .venv/bin/python bench/streaming.py [--runs 3]
[--k 1] [--judge-cap 160]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from collective.graph import CouncilContext, build_graph  # noqa: E402

QUESTION = "Which filament should I use for a part that sits in a hot car, and why?"


async def _run(ctx: CouncilContext) -> dict[str, float]:
    graph = build_graph()
    started = time.perf_counter()
    first = last = None
    pieces = 0
    final: dict = {}
    async for mode, chunk in graph.astream(
        {"question": QUESTION}, context=ctx, stream_mode=["messages", "values"]
    ):
        if mode == "values":
            final = chunk
            continue
        message, meta = chunk
        if meta.get("agent") == "judge" and message.content:
            now = time.perf_counter()
            first = first or now
            last = now
            pieces += 1
    ended = time.perf_counter()
    if first is None or last is None:
        raise SystemExit("the judge streamed nothing; is the embedded model available?")
    timings = final.get("timings", {})
    return {
        "first_ms": (first - started) * 1000,
        "last_ms": (last - started) * 1000,
        "run_ms": (ended - started) * 1000,
        "judge_ttft_ms": timings.get("judge_ttft_ms", float("nan")),
        "judge_ms": timings.get("judge_ms", float("nan")),
        "pieces": float(pieces),
    }


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--k", type=int, default=1)
    parser.add_argument("--judge-cap", type=int, default=160)
    args = parser.parse_args()
    ctx = CouncilContext(
        k=args.k,
        output_caps={"planner": 32, "specialist": 64, "judge": args.judge_cap},
        temperature=0.0,
        review=False,
    )
    judge = ctx.judge if isinstance(ctx.judge, str) else ctx.judge[0]
    override = os.environ.get("COLLECTIVE_EMBEDDED_MODEL")
    if override:
        judge += f", every embedded role on {override}"
    print(
        f"streaming: embedded default (judge {judge}), k={args.k}, judge cap {args.judge_cap} "
        f"tokens, {args.runs} runs (the first loads the models)"
    )
    rows = []
    for n in range(1, args.runs + 1):
        row = asyncio.run(_run(ctx))
        rows.append(row)
        print(
            f"  run {n}: first verdict token {row['first_ms'] / 1000:7.2f} s  "
            f"whole verdict {row['last_ms'] / 1000:7.2f} s  run {row['run_ms'] / 1000:7.2f} s  "
            f"judge ttft {row['judge_ttft_ms'] / 1000:6.2f} s of {row['judge_ms'] / 1000:6.2f} s  "
            f"({row['pieces']:.0f} pieces)"
        )
    warm = rows[1:] or rows
    first = statistics.median(r["first_ms"] for r in warm)
    whole = statistics.median(r["last_ms"] for r in warm)
    ttft = statistics.median(r["judge_ttft_ms"] for r in warm)
    judge_ms = statistics.median(r["judge_ms"] for r in warm)
    print(
        f"median of warm runs: first verdict token {first / 1000:.2f} s, whole verdict "
        f"{whole / 1000:.2f} s (first token at {first / whole:.0%} of the wait); judge: first "
        f"token {ttft / 1000:.2f} s of its {judge_ms / 1000:.2f} s"
    )


if __name__ == "__main__":
    main()
