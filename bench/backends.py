"""Overhead of collective's llama-server backend over a raw httpx request, measured in one run.

Starts the real llama-server with the embedded gemma model (`-c 8192 -np 2`), then times many
identical chats of a ~600-token prompt with `max_tokens=1` and a warm prompt cache, alternating:

* raw: one `httpx.AsyncClient.post("/v1/chat/completions")` and `response.json()`;
* collective: `LlamaServerBackend.chat` (exact count via /apply-template + /tokenize, window
  check, request, parse into `ChatResult`).

Prints the median and mean wall time of each and their ratio (goal <= 1.10).
Run: .venv/bin/python bench/backends.py [--calls 60]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from collective.models.embedded import embedded_model_path  # noqa: E402
from collective.models.llama_server import LlamaServerBackend  # noqa: E402

GOAL = 1.10


def _binary() -> str:
    binary = os.environ.get("COLLECTIVE_LLAMA_SERVER")
    if binary:
        return binary
    out = subprocess.run(
        ["bash", str(REPO / "ops/llama-server/build.sh")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    return out.stdout.strip().splitlines()[-1]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(
    binary: str,
    model: Path | None,
    *args: str,
    port: int | None = None,
    log: Path | None = None,
) -> tuple[subprocess.Popen[bytes], str]:
    """llama-server with `model` and `args`, once its `/health` answers 200.

    `model` None starts a router (its models come in `args`); `port` None takes a free one;
    the server's output goes to `log` (appended) where given, else nowhere.
    """
    port = port or _port()
    argv = [binary, *(("-m", str(model)) if model is not None else ()), "--host", "127.0.0.1"]
    argv += ["--port", str(port), "-t", str(os.cpu_count() or 2), *args]
    sink = log.open("ab") if log is not None else contextlib.nullcontext(subprocess.DEVNULL)
    with sink as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    proc.wait(timeout=10)
    raise RuntimeError(f"llama-server {' '.join(args)} did not start")


async def _run(url: str, calls: int) -> dict[str, float]:
    note = "PETG prints at 230-250 °C and softens near 70 °C; PLA softens near 60 °C. "
    messages = [
        {"role": "system", "content": "You are a concise materials assistant."},
        {"role": "user", "content": note * 30 + "Which filament survives a hot car?"},
    ]
    body = {"messages": messages, "max_tokens": 1, "temperature": 0.0, "cache_prompt": True}
    backend = LlamaServerBackend(url)
    raw_ms: list[float] = []
    cold_ms: list[float] = []
    memo_ms: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for _ in range(5):  # warm both paths and the slot's prompt cache
            (await client.post("/v1/chat/completions", json=body)).json()
            await backend.chat(messages, max_tokens=1, temperature=0.0)  # type: ignore[arg-type]
        for _ in range(calls):
            t = time.perf_counter()
            data = (await client.post("/v1/chat/completions", json=body)).json()
            raw_ms.append((time.perf_counter() - t) * 1000)
            assert data["usage"]["completion_tokens"] <= 1
            backend.prompt_memo.clear()  # cold: count the prompt from scratch
            t = time.perf_counter()
            result = await backend.chat(messages, max_tokens=1, temperature=0.0)  # type: ignore[arg-type]
            cold_ms.append((time.perf_counter() - t) * 1000)
            assert result.usage.prompt_tokens == data["usage"]["prompt_tokens"]
            count_ms = result.timings["count_ms"]
            t = time.perf_counter()  # memoised: the assembler already counted this prompt
            await backend.chat(messages, max_tokens=1, temperature=0.0)  # type: ignore[arg-type]
            memo_ms.append((time.perf_counter() - t) * 1000)
    await backend.aclose()
    return {
        "prompt_tokens": float(result.usage.prompt_tokens),
        "raw_median_ms": statistics.median(raw_ms),
        "raw_mean_ms": statistics.fmean(raw_ms),
        "cold_median_ms": statistics.median(cold_ms),
        "cold_mean_ms": statistics.fmean(cold_ms),
        "memo_median_ms": statistics.median(memo_ms),
        "memo_mean_ms": statistics.fmean(memo_ms),
        "last_count_ms": count_ms,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args()
    port = _port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        _binary(),
        "-m",
        str(embedded_model_path()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        "8192",
        "-np",
        "2",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                print("llama-server did not start", file=sys.stderr)
                return 1
            time.sleep(0.2)
        figures = asyncio.run(_run(url, args.calls))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    raw_med, raw_mean = figures["raw_median_ms"], figures["raw_mean_ms"]
    print(
        f"backends: llama-server + gemma-3-270m, {args.calls} calls each, "
        f"{figures['prompt_tokens']:.0f}-token prompt, max_tokens=1, warm KV cache"
    )
    print(f"  raw httpx                   median {raw_med:7.2f} ms  mean {raw_mean:7.2f} ms")
    for key, label in (("cold", "collective, cold count"), ("memo", "collective, memoised count")):
        med, mean = figures[f"{key}_median_ms"], figures[f"{key}_mean_ms"]
        print(
            f"  {label:<27} median {med:7.2f} ms  mean {mean:7.2f} ms"
            f"  ratio median {med / raw_med:.3f}  mean {mean / raw_mean:.3f}"
        )
    print(f"  (exact count of the cold path: {figures['last_count_ms']:.2f} ms; goal <= {GOAL})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
