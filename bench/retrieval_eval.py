"""Retrieval evaluation: hit@k, MRR and latency per profile over the labelled query set.

Ingests tests/data/eval_kb (316 chunks) into a temporary SQLite KB, runs every query in
tests/data/eval_queries.json under lean, balanced and deep, and prints, per profile and
difficulty: hit@1, hit@5, hit@injected (a relevant chunk among those injected), recall of the
relevant chunks within the injected set, MRR (over the injected ranking), mean injected count,
rewrite attempts and median/p95 latency. Ends by saying whether deep beats balanced on the hard
queries. All figures come from this one run.

Run: .venv/bin/python bench/retrieval_eval.py [--json]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collective.kb.retrieval import retrieve  # noqa: E402
from collective.kb.sqlite_store import SqliteKnowledgeStore  # noqa: E402

DATA = ROOT / "tests" / "data"
PROFILES = ("lean", "balanced", "deep", "auto")


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def evaluate(store: SqliteKnowledgeStore, queries: list[dict], profile: str) -> dict:
    """Metrics of one profile over `queries`."""
    rows = []
    for q in queries:
        # Warm-up run so the timing reflects a warm page cache, then the measured run.
        retrieve(store, q["query"], profile)
        result = retrieve(store, q["query"], profile)
        ranked = [c.id for c in result.injected]
        relevant = set(q["relevant"])
        first = next((i for i, cid in enumerate(ranked) if cid in relevant), None)
        rows.append(
            {
                "hit1": first == 0,
                "hit5": first is not None and first < 5,
                "hit_injected": first is not None,
                "recall": len(relevant & set(ranked)) / len(relevant),
                "rr": 0.0 if first is None else 1.0 / (first + 1),
                "injected": len(ranked),
                "rewrites": len(result.rewrites),
                "latency_ms": result.latency_ms,
                "applied": result.applied,
            }
        )
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
        "applied": applied,
    }


def main() -> None:
    doc = json.loads((DATA / "eval_queries.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteKnowledgeStore(Path(tmp) / "eval.sqlite")
        store.add_paths([DATA / "eval_kb"], base=DATA)
        chunks = store.count()
        results: dict[str, dict[str, dict]] = {}
        for difficulty in ("easy", "hard", "all"):
            subset = [q for q in doc["queries"] if difficulty in ("all", q["difficulty"])]
            results[difficulty] = {p: evaluate(store, subset, p) for p in PROFILES}
        store.close()
    hard = results["hard"]
    deep_wins = hard["deep"]["mrr"] > hard["balanced"]["mrr"]
    verdict = {
        "deep_beats_balanced_on_hard": deep_wins,
        "hard_mrr": {"balanced": hard["balanced"]["mrr"], "deep": hard["deep"]["mrr"]},
        "hard_recall@injected": {
            "balanced": hard["balanced"]["recall@injected"],
            "deep": hard["deep"]["recall@injected"],
        },
    }
    if "--json" in sys.argv:
        print(json.dumps({"chunks": chunks, "results": results, "verdict": verdict}, indent=1))
        return
    print(f"KB: {chunks} chunks; queries: {len(doc['queries'])}")
    header = (
        f"{'set':5} {'profile':9} {'n':>3} {'hit@1':>6} {'hit@5':>6} {'hit@inj':>7} "
        f"{'rec@inj':>7} {'MRR':>6} {'inj':>5} {'rewr':>5} {'p50 ms':>7} {'p95 ms':>7}"
    )
    print(header)
    for difficulty, by_profile in results.items():
        for profile, m in by_profile.items():
            print(
                f"{difficulty:5} {profile:9} {m['queries']:>3} {m['hit@1']:>6.3f} "
                f"{m['hit@5']:>6.3f} {m['hit@injected']:>7.3f} {m['recall@injected']:>7.3f} "
                f"{m['mrr']:>6.3f} {m['mean_injected']:>5.1f} {m['mean_rewrites']:>5.1f} "
                f"{m['latency_p50_ms']:>7.2f} {m['latency_p95_ms']:>7.2f}"
            )
    auto = results["all"]["auto"]["applied"]
    print(f"auto applied: {auto}")
    print(
        f"deep beats balanced on hard queries (MRR): {'yes' if deep_wins else 'no'} "
        f"(deep {hard['deep']['mrr']:.3f} vs balanced {hard['balanced']['mrr']:.3f}; "
        f"recall@injected deep {hard['deep']['recall@injected']:.3f} vs balanced "
        f"{hard['balanced']['recall@injected']:.3f})"
    )


if __name__ == "__main__":
    main()
