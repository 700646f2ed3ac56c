"""The latency `collective serve` and `collective mcp` add to asking the council in process.

    python bench/serve_latency.py [--runs 24] [--latency 0.05] [--k 2]

Every path asks the same council (k specialists and the judge on a scripted OpenAI-protocol
model server of fixed latency, tests/serve/servers.py, real HTTP; retrieval on the demo KB) a
question on a fresh thread, `--runs` times after one warm-up:

* in process, `collective.session.ask` (what `collective ask` runs: it opens and closes the
  session, checkpointer and store, each time);
* in process, `collective.session.run_council` on a session kept open (what the servers do);
* `collective serve` through the official `openai` client, not streamed and streamed (to the
  last chunk);
* `collective mcp` through the official `mcp` client, over stdio and over streamable HTTP.

The paths take turns, one run each per round, so that the machine's load drifts over all of
them alike. The added latency is each server path's p50 and p95 less the open session's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("COLLECTIVE_RERANK", "none")
os.environ.setdefault("COLLECTIVE_KB_EXPANSION", "none")

from tests.serve.servers import Process, council_config, model_server  # noqa: E402

QUESTION = "Which filament should I use for a part that sits in a hot car?"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


Once = Callable[[], Awaitable[None]]


async def measure(config_path: Path, serve_url: str, mcp_url: str, runs: int) -> dict:
    """Every path once per round, `runs` rounds after a warm-up round (load drifts evenly)."""
    import httpx2
    import openai
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    from collective.session import ask, load_settings, open_session, preflight, run_council

    config = load_settings(config_path, {}).config
    client = openai.AsyncOpenAI(base_url=f"{serve_url}/v1", api_key="-", max_retries=0)
    messages = [{"role": "user", "content": QUESTION}]
    env = {k: v for k, v in os.environ.items() if k.startswith(("COLLECTIVE_", "PYTHON", "PATH"))}
    stdio = StdioServerParameters(
        command=sys.executable,
        args=["-m", "collective.cli", "mcp", "--config", str(config_path)],
        cwd=str(config_path.parent),
        env=env,
    )
    async with AsyncExitStack() as stack:
        session = await open_session(config, stack)
        over_stdio = await stack.enter_async_context(Client(stdio, read_timeout_seconds=120))
        over_http = await stack.enter_async_context(
            Client(streamable_http_client(mcp_url, http_client=httpx2.AsyncClient(timeout=120)))
        )

        async def whole() -> None:
            await client.chat.completions.create(model="collective", messages=messages)

        async def streamed() -> None:
            stream = await client.chat.completions.create(
                model="collective", messages=messages, stream=True
            )
            async for _ in stream:
                pass

        def tool(mcp: Client) -> Once:
            async def once() -> None:
                result = await mcp.call_tool("ask", {"question": QUESTION})
                assert not result.is_error, result.content

            return once

        async def library() -> None:
            await ask(config, QUESTION)

        async def kept_open() -> None:
            await run_council(session, QUESTION, uuid.uuid4().hex)

        paths: dict[str, Once] = {
            "in process, session.ask": library,
            "in process, open session": kept_open,
            "serve, not streamed": whole,
            "serve, streamed": streamed,
            "mcp, stdio": tool(over_stdio),
            "mcp, streamable HTTP": tool(over_http),
        }
        times: dict[str, list[float]] = {path: [] for path in paths}
        for n in range(-1, runs):  # -1: the warm-up round
            for path, once in paths.items():
                started = time.perf_counter()
                await once()
                if n >= 0:
                    times[path].append(time.perf_counter() - started)
                if path == "in process, session.ask":
                    # It closes every backend of the process as it ends (`close_all`), the open
                    # session's too: their next call would make them again, in the run timed.
                    await preflight(config)
        return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=24)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--k", type=int, default=2)
    args = parser.parse_args()

    models = model_server(latency_s=args.latency)
    directory = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    os.chdir(directory)
    config = council_config(directory, models, k=args.k)
    load = os.getloadavg()
    serve = Process(["serve", "--port", "0", "--config", str(config)], directory).wait_ready()
    mcp_http = Process(
        ["mcp", "--transport", "http", "--port", "0", "--config", str(config)], directory
    ).wait_ready()
    try:
        results = asyncio.run(measure(config, serve.url, f"{mcp_http.url}/mcp", args.runs))
    finally:
        serve.stop()
        mcp_http.stop()
        models.stop()
    base = results["in process, open session"]
    print(
        f"runs {args.runs} each (paths in turn, after a warm-up round), k {args.k}, every model "
        f"call {args.latency} s; load average {load[0]:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end"
    )
    print(f"{'path':<28}{'p50':>9}{'p95':>9}{'mean':>9}   added to the open session")
    for path, times in results.items():
        p50, p95 = pct(times, 0.5), pct(times, 0.95)
        added = (
            ""
            if times is base
            else f"   p50 {1000 * (p50 - pct(base, 0.5)):+.0f} ms, "
            f"p95 {1000 * (p95 - pct(base, 0.95)):+.0f} ms"
        )
        print(f"{path:<28}{p50:>8.3f}s{p95:>8.3f}s{statistics.mean(times):>8.3f}s{added}")


if __name__ == "__main__":
    main()
