"""Benchmark: the council reads its shared prompt once (issue 25).

On the embedded default (Qwen2.5-Coder-0.5B in process, `make demo`'s question over the demo
KB), the planner and K specialists run through the real graph (the judge is scripted: it is
another model and not what this measures), side by side in one run:

* `batched`: the batch engine as shipped: the members copy the shared prefix from the KV (the
  planner's, or the first member's) and decode together in one batch;
* `one-at-a-time`: the same engine held to one sequence and no prefix cache: members one after
  another, each reading its whole prompt, as before issue 25.

Printed per K (1, 3, 5): the specialist phase's wall (the slowest member, they start together)
over one specialist's wall (the K=1 run; goal <= 1.3), and the prompt tokens computed for the K
members over one member's prompt (goal <= 1.2). `--repack` first measures prompt and generation
tokens/s with llama.cpp's weight repacking off and on (`use_extra_bufts`); `--wait-policy`
measures the same in subprocesses under `OMP_WAIT_POLICY=ACTIVE`, `PASSIVE`, unset, and
`GOMP_SPINCOUNT=1000` (collective's default; `$BENCH_WAIT_POLICIES` names others), with
one and two threads (`--beside-busy`: next to another llama.cpp process writing without pause);
`--server URL` runs the members against a llama-server (`-np K`) and reports its reuse
(`cache_n`) next to what it computed (`prompt_n`). `--decode-steps` times one decode step of the
batch engine with 1..5 sequences generating together (the cost the phase ratio rests on: batching
saves the members' prefill, and saves their decode only where a step of K tokens costs less
than K steps of one).

Usage: python bench/council_prefix.py [--k 1 3 5] [--cap N] [--repack] [--wait-policy]
       [--decode-steps] [--server URL]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collective.graph import CouncilContext, build_graph  # noqa: E402
from collective.models.base import Backend  # noqa: E402
from collective.models.embedded import embedded_model, embedded_model_path  # noqa: E402
from collective.models.llamacpp_in_process import (
    EMBEDDED_N_CTX,  # noqa: E402
    LlamaCppBackend,  # noqa: E402
)
from tests.fakes import ScriptedBackend  # noqa: E402

QUESTION = "Which filament should I use for a part that sits in a hot car, and why?"


def embedded(one_at_a_time: bool = False, repack: bool = True) -> LlamaCppBackend:
    """The embedded default as the registry builds it, optionally one sequence at a time."""
    from importlib import resources

    model = embedded_model("embedded:qwen2.5-coder-0.5b")
    template = None
    if model.turn_template:
        template = (
            resources.files("collective") / "data/templates" / model.turn_template
        ).read_text()
    extra: dict[str, Any] = {"n_seq_max": 1, "prefix_cache": False} if one_at_a_time else {}
    backend = LlamaCppBackend(
        embedded_model_path(model.key),
        n_ctx=EMBEDDED_N_CTX,
        name=model.name,
        chat_template=template,
        repeat_penalty=model.repeat_penalty,
        repack=repack,
        **extra,
    )
    backend.output_cap = model.output_cap
    return backend


async def council(
    backend: Backend, k: int, kb: str, cap: int | None, retrieval: str = "auto"
) -> dict[str, Any]:
    """Plan and K specialists on `backend` (the judge scripted); the figures of the run.

    In process the KV starts empty (nothing left from the run before), so every run reads its
    planner's prompt whole.
    """
    if isinstance(backend, LlamaCppBackend) and backend.loaded:
        for seq in list(backend.engine._seqs.values()):
            backend.engine._drop(seq)
    ctx = CouncilContext(
        k=k,
        planner=backend,
        specialists=[backend],
        judge=ScriptedBackend("judge", "ASA [KB#x]"),
        kb=kb,
        judge_tools=False,
        retrieval=retrieval,
        output_caps={"specialist": cap} if cap else {},
    )
    started = time.perf_counter()
    out = await build_graph().ainvoke({"question": QUESTION}, context=ctx)
    wall = time.perf_counter() - started
    timings = out["timings"]
    members = [b for b in out["budgets"] if b["node"].startswith("specialist-")]
    plan = next(b for b in out["budgets"] if b["node"] == "plan")
    return {
        "k": k,
        "wall_s": wall,
        "plan_s": timings["plan_ms"] / 1000,
        "phase_s": max(timings[f"{b['node']}_ms"] for b in members) / 1000,
        "member_s": [round(timings[f"{b['node']}_ms"] / 1000, 1) for b in members],
        "ttft_s": [round(timings.get(f"{b['node']}_ttft_ms", 0) / 1000, 1) for b in members],
        "prompt": [b["prompt_tokens"] for b in members],
        "shared": [b["shared_tokens"] for b in members],
        "reused": [b["reused_tokens"] or 0 for b in members],
        "output": [b["output_tokens"] for b in members],
        "plan_prompt": plan["prompt_tokens"],
        "plan_reused": plan["reused_tokens"],
    }


def report(mode: str, run: dict[str, Any], single: dict[str, Any] | None) -> None:
    computed = sum(p - r for p, r in zip(run["prompt"], run["reused"], strict=True))
    one = statistics.mean(run["prompt"])
    line = (
        f"{mode:14} K={run['k']}: plan {run['plan_s']:.1f} s (prompt {run['plan_prompt']}, "
        f"reused {run['plan_reused']}), specialists {run['phase_s']:.1f} s "
        f"(each {run['member_s']}, ttft {run['ttft_s']}), prompts {run['prompt']} shared "
        f"{run['shared']} reused {run['reused']}, outputs {run['output']}; computed/one prompt "
        f"{computed / one:.2f}"
    )
    if single is not None:
        line += f"; phase/one specialist {run['phase_s'] / single['phase_s']:.2f}"
    print(line, flush=True)


async def prefix_bench(ks: list[int], cap: int | None, retrieval: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        kb = str(Path(tmp) / "kb.sqlite")
        for mode, one in (("batched", False), ("one-at-a-time", True)):
            backend = embedded(one)
            try:
                await backend.context_window()  # load
                single = await council(backend, 1, kb, cap, retrieval)
                report(mode, single, None)
                for k in ks:
                    if k != 1:
                        report(mode, await council(backend, k, kb, cap, retrieval), single)
            finally:
                await backend.aclose()


def _speed_backend(repack: bool) -> LlamaCppBackend:
    backend = embedded(True, repack=repack)
    backend.n_ctx_requested = 4096  # the speed test needs little KV
    return backend


def _speed_round(backend: LlamaCppBackend, prompt_tokens: int, output: int) -> tuple[float, float]:
    """Prompt tok/s (a prompt read whole) and generation tok/s (after the same prompt)."""
    from collective.models.batch_engine import GenerationRequest

    chat = backend._load_sync()
    words = " ".join(f"filament{i % 97} softens at {40 + i % 70} C." for i in range(400))
    ids = chat.model.tokenize(words.encode(), add_bos=False, special=False)[:prompt_tokens]
    engine = backend.engine
    started = time.perf_counter()
    engine.generate(GenerationRequest(ids, 1, temperature=0.0))
    prefill = time.perf_counter() - started
    stamps: list[float] = []  # when each piece of the answer arrived (a piece per token)
    engine.generate(
        GenerationRequest(
            ids, output, temperature=0.0, on_text=lambda _: stamps.append(time.perf_counter())
        )
    )
    decode = stamps[-1] - stamps[0] if len(stamps) > 1 else float("nan")
    return len(ids) / prefill, (len(stamps) - 1) / decode


def speed(repack: bool, prompt_tokens: int = 400, output: int = 32) -> dict[str, float]:
    """Prompt and generation tokens/s of the embedded default, one sequence (median of 3)."""
    backend = _speed_backend(repack)
    _speed_round(backend, 32, 2)  # load, warm
    rounds = [_speed_round(backend, prompt_tokens, output) for _ in range(3)]
    backend.engine.close()
    return {
        "prompt_per_s": statistics.median(r[0] for r in rounds),
        "gen_per_s": statistics.median(r[1] for r in rounds),
    }


def repack_bench(rounds: int = 3) -> None:
    """Repacking off and on, alternating in one process (medians: the load moves)."""
    backends = {repack: _speed_backend(repack) for repack in (False, True)}
    figures: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for backend in backends.values():
        _speed_round(backend, 32, 2)  # load, warm
    for _ in range(rounds):
        for repack, backend in backends.items():
            figures[repack].append(_speed_round(backend, 400, 32))
    for repack, rows in figures.items():
        print(
            f"repack {'on ' if repack else 'off'}: prompt "
            f"{statistics.median(r[0] for r in rows):.1f} tok/s, generation "
            f"{statistics.median(r[1] for r in rows):.1f} tok/s (medians of {rounds}: "
            f"{[(round(p), round(g, 1)) for p, g in rows]}; load average "
            f"{os.getloadavg()[0]:.1f})",
            flush=True,
        )
    for backend in backends.values():
        backend.engine.close()


def decode_step_bench(rows: tuple[int, ...] = (1, 2, 3, 4, 5), output: int = 48) -> None:
    """The engine's decode step with n sequences generating together, against n = 1.

    Each of the n requests reads the same 1,000-token prompt (computed once, then copied in the
    KV) and writes `output` tokens greedily; a step's time is the median gap between the first
    request's tokens while all n generate (llama_decode of n rows plus n samplers).
    """
    from concurrent.futures import ThreadPoolExecutor

    from collective.models.batch_engine import GenerationRequest

    backend = embedded()
    backend.n_ctx_requested = 8192
    chat = backend._load_sync()
    words = " ".join(f"filament{i % 97} softens at {40 + i % 70} C." for i in range(800))
    ids = chat.model.tokenize(words.encode(), add_bos=False, special=False)[:1000]
    engine = backend.engine
    engine.generate(GenerationRequest(ids, 1, temperature=0.0))  # the prompt, in the KV
    base = 0.0
    for n in rows:
        stamps: list[float] = []

        def one(i: int, stamps: list[float] = stamps) -> None:
            on_text = (lambda _: stamps.append(time.perf_counter())) if i == 0 else None
            engine.generate(GenerationRequest(ids, output, temperature=0.0, on_text=on_text))

        with ThreadPoolExecutor(n) as pool:
            list(pool.map(one, range(n)))
        step = statistics.median(b - a for a, b in itertools.pairwise(stamps[4:]))
        base = base or step
        print(
            f"decode step, {n} sequence(s): {step * 1000:.1f} ms ({step / base:.2f} x one; "
            f"{step * 1000 / n:.1f} ms a token; load average {os.getloadavg()[0]:.1f})",
            flush=True,
        )
    engine.close()


BUSY = """
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=1024, n_threads=2, verbose=False)
while True:
    llm.create_completion("Write a long story about a lighthouse keeper.", max_tokens=256)
"""
"""Another llama.cpp process (OpenMP's default wait policy), writing without pause."""

SPEED = """
import json, os, sys
if os.environ.get("OMP_WAIT_POLICY") == "unset":
    del os.environ["OMP_WAIT_POLICY"]
    import llama_cpp  # libgomp reads its environment when it loads: before collective sets it
import council_prefix as b
print(json.dumps(b.speed(True)))
"""


WAIT_POLICIES = [
    (policy, threads)
    for policy in os.environ.get(
        "BENCH_WAIT_POLICIES", "ACTIVE,PASSIVE,unset,unset GOMP_SPINCOUNT=1000"
    ).split(",")
    for threads in (2, 1)
]


def wait_policy_bench(beside_busy: bool) -> None:
    """Prompt and generation tok/s under each OpenMP wait policy (subprocesses), optionally
    beside another llama.cpp process that writes without pause on the same cores."""
    busy = None
    if beside_busy:
        judge = embedded_model_path(embedded_model("embedded:qwen2.5-coder-1.5b").key)
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        busy = subprocess.Popen([sys.executable, "-c", BUSY, str(judge)], env=env)
        time.sleep(20)  # loaded and writing
    try:
        for label, threads in WAIT_POLICIES:  # "unset GOMP_SPINCOUNT=1000": the two variables
            policy, _, spins = label.partition(" GOMP_SPINCOUNT=")
            env = {**os.environ, "OMP_WAIT_POLICY": policy, "COLLECTIVE_THREADS": str(threads)}
            if spins:
                env["GOMP_SPINCOUNT"] = spins
            done = subprocess.run(
                [sys.executable, "-c", SPEED],
                cwd=Path(__file__).parent,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{'beside a busy llama.cpp: ' if busy else ''}OMP_WAIT_POLICY={label} threads "
                f"{threads}: prompt {figures['prompt_per_s']:.1f} tok/s, generation "
                f"{figures['gen_per_s']:.1f} tok/s (load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


async def server_bench(url: str, ks: list[int], cap: int | None, retrieval: str) -> None:
    from collective.models.llama_server import LlamaServerBackend

    with tempfile.TemporaryDirectory() as tmp:
        kb = str(Path(tmp) / "kb.sqlite")
        backend = LlamaServerBackend(url)
        try:
            single = await council(backend, 1, kb, cap, retrieval)
            report("llama-server", single, None)
            for k in ks:
                if k != 1:
                    report("llama-server", await council(backend, k, kb, cap, retrieval), single)
        finally:
            await backend.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--cap", type=int, default=None, help="specialist output cap")
    parser.add_argument("--repack", action="store_true")
    parser.add_argument("--wait-policy", action="store_true")
    parser.add_argument("--beside-busy", action="store_true", help="--wait-policy under load")
    parser.add_argument("--decode-steps", action="store_true")
    parser.add_argument("--server", default=None)
    parser.add_argument("--retrieval", default="auto", help="lean: shorter prompts")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores", flush=True)
    if args.repack or args.wait_policy or args.decode_steps:  # measurements of one model
        if args.repack:
            repack_bench()
        if args.wait_policy:
            wait_policy_bench(args.beside_busy)
        if args.decode_steps:
            decode_step_bench()
        return
    if args.server:
        asyncio.run(server_bench(args.server, args.k, args.cap, args.retrieval))
    else:
        asyncio.run(prefix_bench(args.k, args.cap, args.retrieval))


if __name__ == "__main__":
    main()
