"""Retrieval evaluation: hit@k, MRR and latency per profile, on a tune/report split.

Ingests tests/data/eval_kb (400 chunks, with vectors from the configured embedding model) into
a temporary SQLite KB and resolves every query's relevant chunks from its references
(`file#section`) on each run, so an edit to the KB text can never leave stale labels. Query
sets:

* tests/data/eval_queries.json, split by id into a *tune* half (even positions of each
  difficulty) and a *report* half (odd positions): retrieval was tuned on `tune` only;
* tests/data/eval_queries_heldout.json: paraphrases written the way users ask, never tuned on.

Per profile and set it prints hit@1, hit@5, hit@injected, recall of the relevant chunks within
the injected set, MRR (over the injected ranking), mean injected count, rewrite attempts and
median/p95 latency, then a paired bootstrap 95% CI of deep minus balanced (MRR and hit@5) on the
hard queries. All figures come from this one run.

Latency: p50/p95 of a repeated query, and `cold p50` of its first run (a new query: its
embedding and, for deep, the reranker's model calls; the models already loaded).

Run: .venv/bin/python bench/retrieval_eval.py [--json] [--lexical] [--fusion convex|rrf]
     [--dense-weight W] [--sets tune,report,all,heldout] [--no-rerank]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collective.kb import retrieval  # noqa: E402
from collective.kb.retrieval import retrieve  # noqa: E402
from collective.kb.sqlite_store import SqliteKnowledgeStore  # noqa: E402

DATA = ROOT / "tests" / "data"
PROFILES = ("lean", "balanced", "deep", "auto")


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def resolve(store: SqliteKnowledgeStore, refs: list[str]) -> set[str]:
    """The ids of every chunk under each `file#section` reference (none found: an error)."""
    by_ref: dict[str, set[str]] = {}
    for chunk in store.list():
        key = f"{chunk.source.removeprefix('eval_kb/')}#{chunk.heading.split(' > ')[-1]}"
        by_ref.setdefault(key, set()).add(chunk.id)
    ids: set[str] = set()
    for ref in refs:
        if ref not in by_ref:
            raise SystemExit(f"reference {ref!r} names no chunk of the eval KB; fix the label")
        ids |= by_ref[ref]
    return ids


def load_sets(store: SqliteKnowledgeStore) -> dict[str, list[dict]]:
    """The query sets, each query with `relevant` rebuilt from its references."""
    doc = json.loads((DATA / "eval_queries.json").read_text(encoding="utf-8"))
    held = json.loads((DATA / "eval_queries_heldout.json").read_text(encoding="utf-8"))
    labelled = []
    for q in doc["queries"]:
        labelled.append({**q, "relevant": resolve(store, q["relevant_refs"])})
    tune, report = [], []
    for difficulty in ("easy", "hard"):
        group = [q for q in labelled if q["difficulty"] == difficulty]
        tune += group[0::2]
        report += group[1::2]
    heldout = [
        {**q, "difficulty": "hard", "relevant": resolve(store, q["refs"])} for q in held["queries"]
    ]
    return {"tune": tune, "report": report, "all": labelled, "heldout": heldout}


def run_queries(store: SqliteKnowledgeStore, queries: list[dict], profile: str) -> list[dict]:
    """One row per query: where the first relevant chunk landed, recall, latency."""
    rows = []
    for q in queries:
        # Warm-up (page cache, the query's vector, deep's reranker scores); its latency is
        # the cold one: a new query with the model loaded.
        cold = retrieve(store, q["query"], profile).latency_ms
        result = retrieve(store, q["query"], profile)
        ranked = [c.id for c in result.injected]
        relevant = q["relevant"]
        first = next((i for i, cid in enumerate(ranked) if cid in relevant), None)
        rows.append(
            {
                "id": q["id"],
                "difficulty": q["difficulty"],
                "hit1": first == 0,
                "hit5": first is not None and first < 5,
                "hit_injected": first is not None,
                "recall": len(relevant & set(ranked)) / len(relevant),
                "rr": 0.0 if first is None else 1.0 / (first + 1),
                "injected": len(ranked),
                "rewrites": len(result.rewrites),
                "latency_ms": result.latency_ms,
                "cold_ms": cold,
                "applied": result.applied,
            }
        )
    return rows


def summarise(rows: list[dict]) -> dict:
    """Metrics over rows."""
    n = len(rows) or 1
    latencies = [r["latency_ms"] for r in rows]
    applied: dict[str, int] = {}
    for r in rows:
        applied[r["applied"]] = applied.get(r["applied"], 0) + 1
    return {
        "queries": len(rows),
        "hit@1": sum(r["hit1"] for r in rows) / n,
        "hit@5": sum(r["hit5"] for r in rows) / n,
        "hit@injected": sum(r["hit_injected"] for r in rows) / n,
        "recall@injected": sum(r["recall"] for r in rows) / n,
        "mrr": sum(r["rr"] for r in rows) / n,
        "mean_injected": sum(r["injected"] for r in rows) / n,
        "mean_rewrites": sum(r["rewrites"] for r in rows) / n,
        "latency_p50_ms": statistics.median(latencies) if latencies else 0.0,
        "latency_p95_ms": _percentile(latencies, 95) if latencies else 0.0,
        "cold_p50_ms": statistics.median(r["cold_ms"] for r in rows) if rows else 0.0,
        "applied": applied,
    }


def bootstrap(a: list[dict], b: list[dict], key: str, rounds: int = 5000) -> dict:
    """Paired bootstrap of mean(a[key] - b[key]): the mean and a 95% interval."""
    diffs = [float(x[key]) - float(y[key]) for x, y in zip(a, b, strict=True)]
    rng = random.Random(26)
    means = sorted(sum(rng.choice(diffs) for _ in diffs) / len(diffs) for _ in range(rounds))
    return {
        "mean": sum(diffs) / len(diffs),
        "ci95": [means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--lexical", action="store_true", help="No vectors (lexical only).")
    parser.add_argument("--fusion", choices=("convex", "rrf"), default=retrieval._FUSION)
    parser.add_argument("--dense-weight", type=float, default=retrieval.DENSE_WEIGHT)
    parser.add_argument("--sets", default="tune,report,all,heldout")
    parser.add_argument("--no-rerank", action="store_true", help="Deep without its reranker.")
    args = parser.parse_args()
    if args.no_rerank:
        os.environ["COLLECTIVE_RERANK"] = "none"
    retrieval._FUSION = args.fusion
    retrieval.DENSE_WEIGHT = args.dense_weight

    with tempfile.TemporaryDirectory() as tmp:
        kwargs = {"embedder": None} if args.lexical else {}
        store = SqliteKnowledgeStore(Path(tmp) / "eval.sqlite", **kwargs)
        started = time.perf_counter()
        store.add_paths([DATA / "eval_kb"], base=DATA)
        ingest_s = time.perf_counter() - started
        chunks = store.count()
        model, vectors, _ = store.vector_status()
        sets = load_sets(store)
        results: dict[str, dict[str, dict]] = {}
        rows_by: dict[tuple[str, str], list[dict]] = {}
        for name in args.sets.split(","):
            results[name] = {}
            for profile in PROFILES:
                rows = run_queries(store, sets[name], profile)
                rows_by[(name, profile)] = rows
                for difficulty in ("easy", "hard"):
                    subset = [r for r in rows if r["difficulty"] == difficulty]
                    if subset and name != "heldout":
                        results[name].setdefault(difficulty, {})[profile] = summarise(subset)
                results[name].setdefault("all", {})[profile] = summarise(rows)
        store.close()

    verdict = {}
    for name in ("report", "all", "heldout"):
        if (name, "deep") not in rows_by:
            continue
        deep = [r for r in rows_by[(name, "deep")] if r["difficulty"] == "hard"]
        balanced = [r for r in rows_by[(name, "balanced")] if r["difficulty"] == "hard"]
        verdict[name] = {
            "deep_minus_balanced_mrr": bootstrap(deep, balanced, "rr"),
            "deep_minus_balanced_hit@5": bootstrap(deep, balanced, "hit5"),
        }
    meta = {
        "chunks": chunks,
        "model": model,
        "vectors": vectors,
        "ingest_s": round(ingest_s, 2),
        "fusion": args.fusion,
        "dense_weight": args.dense_weight,
        "rerank": os.environ.get("COLLECTIVE_RERANK") or "embedded",
    }
    if args.json:
        print(json.dumps({**meta, "results": results, "verdict": verdict}, indent=1))
        return
    print(
        f"KB: {chunks} chunks, {vectors} vectors ({model or 'no model'}), ingest "
        f"{ingest_s:.1f} s; fusion {args.fusion}, dense weight {args.dense_weight}; "
        f"deep's reranker {meta['rerank']}"
    )
    print(
        f"{'set':8} {'diff':5} {'profile':9} {'n':>3} {'hit@1':>6} {'hit@5':>6} {'hit@inj':>7} "
        f"{'rec@inj':>7} {'MRR':>6} {'inj':>5} {'rewr':>5} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'cold p50':>8}"
    )
    for name, by_difficulty in results.items():
        for difficulty, by_profile in by_difficulty.items():
            for profile, m in by_profile.items():
                print(
                    f"{name:8} {difficulty:5} {profile:9} {m['queries']:>3} {m['hit@1']:>6.3f} "
                    f"{m['hit@5']:>6.3f} {m['hit@injected']:>7.3f} {m['recall@injected']:>7.3f} "
                    f"{m['mrr']:>6.3f} {m['mean_injected']:>5.1f} {m['mean_rewrites']:>5.1f} "
                    f"{m['latency_p50_ms']:>7.2f} {m['latency_p95_ms']:>7.2f} "
                    f"{m['cold_p50_ms']:>8.1f}"
                )
        if "all" in by_difficulty and "auto" in by_difficulty["all"]:
            print(f"{name:8} auto applied: {by_difficulty['all']['auto']['applied']}")
    for name, v in verdict.items():
        for key, b in v.items():
            lo, hi = b["ci95"]
            print(
                f"{name:8} hard {key}: {b['mean']:+.3f} (95% CI {lo:+.3f} .. {hi:+.3f})"
                + ("  excludes 0" if lo > 0 or hi < 0 else "")
            )


if __name__ == "__main__":
    main()
