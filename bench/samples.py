"""Benchmark: same-prompt samples on llama-server, one request (`n_cmpl`) against one each.

Two members that sample one prompt alike (`member_temperature_step = 0`, shared evidence, no
plan) answer `make demo`'s question from the demo KB on a llama-server of the 1.5B (`-np 2`):
collective sends them as one request for two completions (`n`, the server's `n_cmpl`), or, with
the server's `most_samples` read as 1, as two requests at once, each with its own seed. Each
run starts a fresh server (no prompt left in its cache), variants alternating round by round.

Printed per run: wall time of the members, the prompt tokens the server computed
(`llamacpp:prompt_tokens_total` from `/metrics`) and the output tokens; then the ratio of the
medians, with the load average.

Usage: python bench/samples.py [--server-binary PATH] [--rounds 2] [--model qwen2.5-coder-1.5b]
(no binary: $COLLECTIVE_LLAMA_SERVER, else the one ops/llama-server/build.sh builds and caches)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends import _binary, _start  # noqa: E402  (same folder: llama-server set-up)

from collective.graph import CouncilContext  # noqa: E402
from collective.graph.builder import build_answer_graph  # noqa: E402
from collective.models.embedded import embedded_model, embedded_model_path  # noqa: E402
from collective.models.llama_server import LlamaServerBackend  # noqa: E402

QUESTION = "Which filament should I use for a part that sits in a hot car, and why?"
VARIANTS = ("one request (n_cmpl)", "a request each")


def prompt_tokens_total(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    match = re.search(r"^llamacpp:prompt_tokens_total (\S+)$", text, re.M)
    return int(float(match.group(1))) if match else -1


async def members(url: str, one_request: bool) -> tuple[float, int]:
    backend = LlamaServerBackend(url, load_wait=60)
    if not one_request:

        async def one() -> int:
            return 1

        backend.most_samples = one  # type: ignore[method-assign]
    ctx = CouncilContext(
        k=2,
        specialists=[backend],
        judge=backend,
        retrieval="balanced",
        evidence="shared",
        member_temperature_step=0.0,
        temperature=0.5,
    )
    started = time.perf_counter()
    out = await build_answer_graph(2, judge=False).ainvoke({"question": QUESTION}, context=ctx)
    wall = time.perf_counter() - started
    await backend.aclose()
    assert all(p["text"] for p in out["proposals"]), out["proposals"]
    (report,) = out["budgets"]
    return wall, report["output_tokens"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-binary")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    args = parser.parse_args()
    binary = args.server_binary or _binary()  # `make test`'s, cached outside the repo
    model = embedded_model_path(embedded_model(f"embedded:{args.model}").key)
    walls: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for round_ in range(args.rounds):
        for variant in VARIANTS:
            server, url = _start(binary, model, "-np", "2", "-c", "8192", "--metrics")
            try:
                wall, output = asyncio.run(members(url, variant == VARIANTS[0]))
                computed = prompt_tokens_total(url)
            finally:
                server.kill()
                server.wait()
            walls[variant].append(wall)
            load = os.getloadavg()[0]
            print(
                f"round {round_ + 1} {variant:22s} wall {wall:6.1f} s  prompt tokens computed "
                f"{computed:5d}  output {output:4d}  load {load:.2f}",
                flush=True,
            )
    one, each = (statistics.median(walls[v]) for v in VARIANTS)
    print(f"median wall: one request {one:.1f} s, a request each {each:.1f} s: {one / each:.2f}x")


if __name__ == "__main__":
    main()
