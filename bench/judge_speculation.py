"""Benchmark: speculation for the judge's verdict and fix calls, on and off, side by side.

`--record FILE` runs one council on the embedded default (`make demo`'s question, the 1.5B judge
in process) and stores the judge's calls that write text (the verdict and, when the claim check
asks for one, the fix: no tools offered) with their messages and output caps.

`--replay FILE` sends those calls again, alternating the variants round by round so that load
drifts hit each alike, each call once untimed first so that every variant reads the prompt from
its cache and the figures are of decoding:

* in process (`LlamaCppBackend` on the 1.5B): prompt lookup off, and `--lookup N ...` tokens
  drafted per step (`GenerationRequest.lookup`);
* with `--server-binary PATH`: llama-server on the 1.5B with `--spec-type none`, and each of
  `--spec ngram-simple ngram-cache ...`, and `draft-simple` with the 0.5B as the draft model.

Printed per variant and call: output tokens, decode tokens/s (output tokens / wall of the
call, the prompt already cached), the ratio to the variant that speculates nothing, and the
acceptance (`draft_n_accepted / draft_n`), with the load average.

`--synthetic FILE` writes one verdict-shaped call instead (the demo KB's chunks on the question,
answered with quotes and citations), for a quick measurement without a council run.

Usage: python bench/judge_speculation.py --record /tmp/judge.json  (or --synthetic FILE)
       python bench/judge_speculation.py --replay /tmp/judge.json [--lookup 4 8] [--rounds 2]
           [--server-binary PATH --spec ngram-simple ngram-cache draft-simple]
"""

from __future__ import annotations

import argparse
import asyncio
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
from collective.models.embedded import embedded_model, embedded_model_path  # noqa: E402
from collective.models.llama_server import LlamaServerBackend  # noqa: E402
from collective.models.llamacpp_in_process import LlamaCppBackend  # noqa: E402
from collective.models.registry import backend_from_spec, close_all  # noqa: E402

QUESTION = "Which filament should I use for a part that sits in a hot car, and why?"
JUDGE = "embedded:qwen2.5-coder-1.5b"


async def record(path: Path) -> None:
    judge = backend_from_spec(JUDGE)
    assert isinstance(judge, LlamaCppBackend)
    calls: list[dict[str, Any]] = []
    stream = judge.stream

    def recording(messages, **kwargs):  # type: ignore[no-untyped-def]
        if not kwargs.get("tools"):
            calls.append({"messages": list(messages), "max_tokens": kwargs["max_tokens"]})
        return stream(messages, **kwargs)

    judge.stream = recording  # type: ignore[method-assign]
    ctx = CouncilContext(judge=judge)
    out = await build_graph().ainvoke({"question": QUESTION}, context=ctx)
    await close_all()
    path.write_text(json.dumps({"calls": calls, "answer": out["answer"]}, indent=1))
    print(f"recorded {len(calls)} judge calls without tools into {path}")


def synthetic(path: Path, chunks: int = 8) -> None:
    """A verdict-shaped call without a council run: the demo KB's chunks on the question, and
    the judge's task of answering with quotes and `[KB#id]` citations."""
    from collective.kb.citations import format_chunk
    from collective.kb.demo import open_default_store
    from collective.kb.retrieval import retrieve

    store = open_default_store(Path(tempfile.mkdtemp()) / "kb.sqlite")
    found = retrieve(store, QUESTION, "balanced", reranker=lambda q, c: [0.0] * len(c))
    kb = "\n\n".join(format_chunk(c) for c in found.injected[:chunks])
    task = (
        f"Knowledge base:\n{kb}\n\nQuestion: {QUESTION}\n\nWrite the verdict: a direct "
        "answer in one sentence, then two or three reasons, each quoting the knowledge base "
        "and citing its chunk as [KB#id]."
    )
    messages = [
        {"role": "system", "content": "You are the judge of a council of experts."},
        {"role": "user", "content": task},
    ]
    path.write_text(json.dumps({"calls": [{"messages": messages, "max_tokens": 160}]}))
    print(f"wrote one verdict-shaped call ({len(kb)} characters of KB) into {path}")


def in_process(lookup: int) -> LlamaCppBackend:
    """The judge as the registry builds it, drafting `lookup` tokens per step."""
    backend = backend_from_spec(JUDGE)
    assert isinstance(backend, LlamaCppBackend)
    backend.lookup = lookup
    return backend


class Server:
    """llama-server on the 1.5B with one speculation setting (one slot)."""

    def __init__(self, binary: str, spec: str, port: int) -> None:
        model = embedded_model_path(embedded_model(JUDGE).key)
        argv = [binary, "-m", str(model), "--port", str(port), "-c", "8192", "-np", "1"]
        argv += ["-t", str(os.cpu_count() or 2), "--jinja", "--spec-type", spec]
        if spec.startswith("draft"):
            draft = embedded_model_path(embedded_model("embedded:qwen2.5-coder-0.5b").key)
            argv += ["-md", str(draft)]
        self.log = open(f"/tmp/bench-spec-{spec}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


async def one(backend: Any, call: dict[str, Any]) -> dict[str, float]:
    started = time.perf_counter()
    result = await backend.chat(call["messages"], max_tokens=call["max_tokens"], temperature=0.2)
    wall = time.perf_counter() - started
    t = result.timings
    tokens = result.usage.completion_tokens
    return {
        "tokens": tokens,
        "tps": tokens / wall if wall else 0.0,
        "server_tps": t.get("predicted_per_second", 0.0),
        "drafted": t.get("draft_n", 0.0),
        "accepted": t.get("draft_n_accepted", 0.0),
        "text": result.text,  # type: ignore[dict-item]
    }


async def replay(path: Path, lookups: list[int], rounds: int, binary: str | None, specs: list[str]):
    calls = json.loads(path.read_text())["calls"]
    print(f"{len(calls)} calls; load {os.getloadavg()}")
    variants: list[tuple[str, Any]] = [("in-process lookup 0", 0)]
    variants += [(f"in-process lookup {n}", n) for n in lookups]
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in variants}
    for _ in range(rounds):
        for name, lookup in variants:
            backend = in_process(lookup)
            for call in calls:
                await one(backend, call)  # the prompt into the cache
                results[name].append(await one(backend, call))
            print(f"{name}: {results[name][-len(calls) :]!r:.300}  load {os.getloadavg()[0]:.2f}")
    await close_all()
    if binary:
        servers = ["none", *specs]
        for name in servers:
            results[f"llama-server {name}"] = []
        for r in range(rounds):
            for i, spec in enumerate(servers):
                server = Server(binary, spec, 18900 + i + 10 * r)
                backend = LlamaServerBackend(server.url, load_wait=300)
                try:
                    await backend.wait_ready()
                    for call in calls:
                        await one(backend, call)
                        results[f"llama-server {spec}"].append(await one(backend, call))
                finally:
                    await backend.aclose()
                    server.stop()
                print(f"llama-server {spec}: load {os.getloadavg()[0]:.2f}")
    summarise(results)


def summarise(results: dict[str, list[dict[str, float]]]) -> None:
    base = {
        "in-process": statistics.mean(r["tps"] for r in results["in-process lookup 0"]),
    }
    if "llama-server none" in results:
        base["llama-server"] = statistics.mean(r["tps"] for r in results["llama-server none"])
    print(f"\n{'variant':28} {'tokens':>7} {'tok/s':>7} {'ratio':>6} {'accepted':>9}")
    for name, rows in results.items():
        tps = statistics.mean(r["tps"] for r in rows)
        drafted = sum(r["drafted"] for r in rows)
        accepted = sum(r["accepted"] for r in rows)
        rate = f"{accepted / drafted:.2f}" if drafted else "-"
        ref = base["llama-server" if name.startswith("llama-server") else "in-process"]
        tokens = statistics.mean(r["tokens"] for r in rows)
        print(f"{name:28} {tokens:7.0f} {tps:7.2f} {tps / ref:6.2f} {rate:>9}")
    ref_texts = [r["text"] for r in results["in-process lookup 0"]]
    for name, rows in results.items():
        if name.startswith("in-process"):
            same = sum(a == r["text"] for a, r in zip(ref_texts, rows, strict=True))
            print(f"{name}: {same} of {len(rows)} answers the same as without lookup")
    print(f"load at the end: {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", type=Path)
    parser.add_argument("--synthetic", type=Path)
    parser.add_argument("--replay", type=Path)
    parser.add_argument("--lookup", type=int, nargs="*", default=[4, 8])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--server-binary")
    specs = ["ngram-simple", "ngram-cache", "draft-simple"]
    parser.add_argument("--spec", nargs="*", default=specs)
    args = parser.parse_args()
    if args.record:
        asyncio.run(record(args.record))
    if args.synthetic:
        synthetic(args.synthetic)
    if args.replay:
        asyncio.run(replay(args.replay, args.lookup, args.rounds, args.server_binary, args.spec))


if __name__ == "__main__":
    main()
