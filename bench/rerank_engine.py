"""Benchmark: deep's reranker on its own context vs as score requests on the judge's engine.

Both score the same candidates with the same prompt on the same loaded weights (the embedded
Qwen2.5-Coder-1.5B, `embedded:qwen2.5-coder-1.5b` as the registry builds the judge):

* `own`: `LlmReranker`, a 4,096-cell context of its own, 2,048-token steps, 16 sequences;
* `engine`: `EngineReranker`, one score request per candidate on the judge backend's
  `BatchEngine` (its 512-token steps), the question computed once by prefix sharing.

Candidates: deep's best `RERANK_K` for each query over the demo KB. The two are alternated
(own, engine, own, engine, ...) with the score memo cleared, so load drifts hit both. Printed:
each round's seconds, the engine/own ratio, how far the scores differ and whether the order of
the head agrees.

Usage: python bench/rerank_engine.py [--rounds 2] [--queries N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collective.kb.demo import open_default_store  # noqa: E402
from collective.kb.rerank import RERANK_MODEL, EngineReranker, LlmReranker  # noqa: E402
from collective.kb.retrieval import RERANK_K, retrieve  # noqa: E402
from collective.models.embedded import embedded_model, embedded_model_path  # noqa: E402
from collective.models.registry import backend_from_spec  # noqa: E402

QUERIES = [
    "Which filament should I use for a part that sits in a hot car, and why?",
    "how long should I dry nylon filament before printing",
    "my prints warp at the corners, what helps",
    "is PETG food safe",
    "what nozzle temperature for ASA",
    "why does TPU string so much",
]


def heads(queries: list[str]) -> list[tuple[str, list[str]]]:
    store = open_default_store(Path(tempfile.mkdtemp()) / "kb.sqlite")
    out = []
    for query in queries:
        seen: list = []

        def capture(q, chunks, seen=seen):
            seen[:] = chunks
            return [0.0] * len(chunks)

        retrieve(store, query, "deep", reranker=capture)
        passages = [f"{c.heading}: {c.text}" if c.heading else c.text for c in seen[:RERANK_K]]
        out.append((query, passages))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--queries", type=int, default=len(QUERIES))
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}")
    work = heads(QUERIES[: args.queries])
    print(f"{len(work)} queries, {sum(len(p) for _, p in work)} candidates")
    judge = backend_from_spec(f"embedded:{RERANK_MODEL}")
    own = LlmReranker(embedded_model_path(embedded_model(f"embedded:{RERANK_MODEL}").key))
    engine = EngineReranker(lambda: judge.engine)  # type: ignore[attr-defined]
    judge.engine  # type: ignore[attr-defined]  # load before timing
    times: dict[str, list[float]] = {"own": [], "engine": []}
    scores: dict[str, list[list[float]]] = {}
    for _ in range(args.rounds):
        for name, reranker in (("own", own), ("engine", engine)):
            start = time.perf_counter()
            scores[name] = [reranker.scores(q, p) for q, p in work]
            times[name].append(time.perf_counter() - start)
            print(f"{name:>6}: {times[name][-1]:.2f} s  load {os.getloadavg()[0]:.2f}")
    ratio = [e / o for e, o in zip(times["engine"], times["own"], strict=True)]
    print(f"engine/own per round: {', '.join(f'{r:.2f}' for r in ratio)}")
    diffs = [
        abs(a - b)
        for sa, sb in zip(scores["own"], scores["engine"], strict=True)
        for a, b in zip(sa, sb, strict=True)
    ]
    print(f"|score difference|: mean {statistics.mean(diffs):.3f}, max {max(diffs):.3f}")
    same_first = sum(
        max(range(len(a)), key=a.__getitem__) == max(range(len(b)), key=b.__getitem__)
        for a, b in zip(scores["own"], scores["engine"], strict=True)
    )
    print(f"same best candidate: {same_first} of {len(work)} queries")
    own.close()


if __name__ == "__main__":
    main()
