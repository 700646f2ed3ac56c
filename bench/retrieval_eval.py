"""Retrieval evaluation: hit@k, MRR and latency per profile, on a tune/report split.

Ingests tests/data/eval_kb (400 chunks, with vectors from the configured embedding model) into
a temporary SQLite KB and resolves every query's relevant chunks from its references
(`file#section`) on each run, so an edit to the KB text can never leave stale labels. Query
sets:

* tests/data/eval_queries.json, split by id into a *tune* half (even positions of each
  difficulty) and a *report* half (odd positions): retrieval was tuned on `tune` only;
* tests/data/eval_queries_heldout.json: paraphrases written the way users ask, never tuned on;
* tests/data/eval_queries_colloquial.json: questions as people ask them (a symptom, a use,
  everyday words; rarely the property or the material), never tuned on.

Every set runs twice, side by side: on the KB with its chunks' expansions (taken from
tests/data/eval_kb_expansions.json, which bench/expansions.py wrote with the local chat model;
its recorded time per chunk is printed) and on the same KB without them.

Deep's reranker scores are kept on disk, by query and passage, in a file committed per reranker
kind and model (`bench/rerank_scores/`, or `--rerank-cache`), so a run on this repository's
sets costs what the fast profiles cost (the reranker runs only for a query or passage it has
not scored); `--sample N` runs N queries of each set (seeded) for a
quicker look.

Per profile and set it prints hit@1, hit@5, hit@injected, recall of the relevant chunks within
the injected set, MRR (over the injected ranking), mean injected count, rewrite attempts and
median/p95 latency, then a paired bootstrap 95% CI of deep minus balanced (MRR and hit@5) on the
hard queries. All figures come from this one run.

Latency: p50/p95 of a repeated query, and `cold p50` of its first run (a new query: its
embedding and, for deep, the reranker's model calls; the models already loaded).

Run: .venv/bin/python bench/retrieval_eval.py [--json] [--lexical] [--fusion convex|rrf]
     [--dense-weight W] [--sets report,heldout,colloquial] [--no-rerank] [--sample N]
     [--expansion on,off] [--rerank-cache PATH]
"""

from __future__ import annotations

import argparse
import hashlib
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

from collective.kb import expansion, retrieval  # noqa: E402
from collective.kb.rerank import RERANK_MODEL, rerank_setting  # noqa: E402
from collective.kb.retrieval import Reranker, retrieve  # noqa: E402
from collective.kb.sqlite_store import SqliteKnowledgeStore  # noqa: E402
from collective.kb.store import Chunk  # noqa: E402

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
    colloquial_doc = json.loads((DATA / "eval_queries_colloquial.json").read_text("utf-8"))
    colloquial = [
        {**q, "difficulty": "hard", "relevant": resolve(store, q["refs"])}
        for q in colloquial_doc["queries"]
    ]
    return {
        "tune": tune,
        "report": report,
        "all": labelled,
        "heldout": heldout,
        "colloquial": colloquial,
    }


def rerank_cache_path() -> Path:
    """The committed score cache of the configured reranker: one file per kind and model."""
    from collective.models.embedded import embedded_model

    kind = rerank_setting()
    model = embedded_model(f"embedded:{RERANK_MODEL}").key
    return ROOT / "bench" / "rerank_scores" / f"{kind}-{model}.json"


def cached_reranker(path: Path) -> Reranker | None:
    """The configured reranker with its scores kept in `path` (None when reranking is off)."""
    from collective.kb.rerank import configured_reranker

    inner = configured_reranker()
    if inner is None:
        return None
    scores: dict[str, float] = {}
    if path.exists():
        scores = json.loads(path.read_text(encoding="utf-8"))

    def key(query: str, chunk: Chunk) -> str:
        return hashlib.sha256(f"{query}\n{chunk.heading}\n{chunk.text}".encode()).hexdigest()[:24]

    def rerank(query: str, chunks: list[Chunk]) -> list[float]:
        keys = [key(query, c) for c in chunks]
        todo = [c for c, k in zip(chunks, keys, strict=True) if k not in scores]
        if todo:
            for c, score in zip(todo, inner(query, todo), strict=True):
                scores[key(query, c)] = float(score)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(scores), encoding="utf-8")
        return [scores[k] for k in keys]

    return rerank  # type: ignore[return-value]


def run_queries(
    store: SqliteKnowledgeStore, queries: list[dict], profile: str, reranker: Reranker | None
) -> list[dict]:
    """One row per query: where the first relevant chunk landed, recall, latency."""
    rows = []
    for q in queries:
        # Warm-up (page cache, the query's vector, deep's reranker scores); its latency is
        # the cold one: a new query with the model loaded.
        cold = retrieve(store, q["query"], profile, reranker=reranker).latency_ms
        result = retrieve(store, q["query"], profile, reranker=reranker)
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


def build(
    path: Path, lexical: bool, expanded: bool, expansions: Path
) -> tuple[SqliteKnowledgeStore, float]:
    """The eval KB at `path` (with the cache `expansions` when `expanded`), and its ingest time."""
    kwargs = {"embedder": None} if lexical else {}
    store = SqliteKnowledgeStore(path, **kwargs)
    started = time.perf_counter()
    store.add_paths([DATA / "eval_kb"], base=DATA, embed=False)
    if expanded:
        cache = expansion.load_cache(expansions)
        stats = expansion.expand_missing(store, None, model="cache", cache=cache)
        if stats.cached < store.count():  # reported with the figures: "N expanded"
            print(
                f"note: {expansions.name} has expansions for {stats.cached} of the eval KB's "
                f"{store.count()} chunks (bench/expansions.py adds the rest)",
                file=sys.stderr,
            )
    store.embed_missing()
    return store, time.perf_counter() - started


EXPANSIONS = DATA / "eval_kb_expansions.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--lexical", action="store_true", help="No vectors (lexical only).")
    parser.add_argument("--fusion", choices=("convex", "rrf"), default=retrieval._FUSION)
    parser.add_argument("--dense-weight", type=float, default=retrieval.DENSE_WEIGHT)
    parser.add_argument("--sets", default="report,heldout,colloquial")
    parser.add_argument("--no-rerank", action="store_true", help="Deep without its reranker.")
    parser.add_argument("--expansion", default="on,off", help="on, off or on,off.")
    parser.add_argument("--sample", type=int, default=0, help="Queries per set (0: all).")
    parser.add_argument(
        "--only-expanded",
        action="store_true",
        help="Only queries whose relevant chunks all have a cached expansion (both modes).",
    )
    parser.add_argument("--rerank-cache", type=Path, help="Default: bench/rerank_scores/...")
    parser.add_argument(
        "--expansions",
        type=Path,
        default=EXPANSIONS,
        help="The expansion cache (bench/ingest.py --keep).",
    )
    args = parser.parse_args()
    if args.no_rerank:
        os.environ["COLLECTIVE_RERANK"] = "none"
    retrieval._FUSION = args.fusion
    retrieval.DENSE_WEIGHT = args.dense_weight
    reranker = cached_reranker(args.rerank_cache or rerank_cache_path())
    cache_doc = (
        json.loads(args.expansions.read_text(encoding="utf-8")) if args.expansions.exists() else {}
    )

    results: dict[str, dict[str, dict[str, dict]]] = {}
    rows_by: dict[tuple[str, str, str], list[dict]] = {}
    meta: dict = {}
    run_started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.expansion.split(","):
            store, ingest_s = build(
                Path(tmp) / f"eval-{mode}.sqlite", args.lexical, mode == "on", args.expansions
            )
            model, vectors, chunks = store.vector_status()
            meta[mode] = {
                "chunks": chunks,
                "vectors": vectors,
                "expansions": store.expansion_status()[0],
                "ingest_s": round(ingest_s, 2),
            }
            meta["model"] = model
            sets = load_sets(store)
            cache = expansion.load_cache(args.expansions)
            expanded_ids = {
                c.id for c in store.list() if expansion.content_key(c.heading, c.text) in cache
            }
            for name in args.sets.split(","):
                queries = sets[name]
                if args.only_expanded:
                    queries = [q for q in queries if q["relevant"] <= expanded_ids]
                if args.sample:
                    queries = random.Random(40).sample(queries, min(args.sample, len(queries)))
                key = f"{name}/{mode}"
                results[key] = {}
                for profile in PROFILES:
                    rows = run_queries(store, queries, profile, reranker)
                    rows_by[(name, mode, profile)] = rows
                    for difficulty in ("easy", "hard"):
                        subset = [r for r in rows if r["difficulty"] == difficulty]
                        if subset and name not in ("heldout", "colloquial"):
                            results[key].setdefault(difficulty, {})[profile] = summarise(subset)
                    results[key].setdefault("all", {})[profile] = summarise(rows)
            store.close()

    verdict = {}
    for (name, mode, profile), rows in rows_by.items():
        if profile != "deep" or (name, mode, "balanced") not in rows_by:
            continue
        deep = [r for r in rows if r["difficulty"] == "hard"]
        balanced = [r for r in rows_by[(name, mode, "balanced")] if r["difficulty"] == "hard"]
        verdict[f"{name}/{mode}"] = {
            "deep_minus_balanced_mrr": bootstrap(deep, balanced, "rr"),
            "deep_minus_balanced_hit@5": bootstrap(deep, balanced, "hit5"),
        }
    meta |= {
        "fusion": args.fusion,
        "dense_weight": args.dense_weight,
        "rerank": rerank_setting(),
        "expansion_model": cache_doc.get("model"),
        "expansion_per_chunk_s": cache_doc.get("per_chunk_s_mean"),
        "wall_s": round(time.perf_counter() - run_started, 1),
    }
    if args.json:
        print(json.dumps({**meta, "results": results, "verdict": verdict}, indent=1))
        return
    for mode in args.expansion.split(","):
        m = meta[mode]
        print(
            f"KB expansion {mode}: {m['chunks']} chunks ({m['expansions']} expanded), "
            f"{m['vectors']} vectors "
            f"({meta['model'] or 'no model'}), built in {m['ingest_s']:.1f} s"
        )
    print(
        f"expansions written by {meta['expansion_model']} at {meta['expansion_per_chunk_s']} s "
        f"a chunk (bench/expansions.py); fusion {args.fusion}, dense weight "
        f"{args.dense_weight}; deep's reranker {meta['rerank']}; this run {meta['wall_s']} s"
    )
    print(
        f"{'set/expansion':16} {'diff':5} {'profile':9} {'n':>3} {'hit@1':>6} {'hit@5':>6} "
        f"{'hit@inj':>7} {'rec@inj':>7} {'MRR':>6} {'inj':>5} {'rewr':>5} {'p50 ms':>7} "
        f"{'p95 ms':>7} {'cold p50':>8}"
    )
    for key, by_difficulty in results.items():
        for difficulty, by_profile in by_difficulty.items():
            for profile, m in by_profile.items():
                print(
                    f"{key:16} {difficulty:5} {profile:9} {m['queries']:>3} {m['hit@1']:>6.3f} "
                    f"{m['hit@5']:>6.3f} {m['hit@injected']:>7.3f} {m['recall@injected']:>7.3f} "
                    f"{m['mrr']:>6.3f} {m['mean_injected']:>5.1f} {m['mean_rewrites']:>5.1f} "
                    f"{m['latency_p50_ms']:>7.2f} {m['latency_p95_ms']:>7.2f} "
                    f"{m['cold_p50_ms']:>8.1f}"
                )
        if "all" in by_difficulty and "auto" in by_difficulty["all"]:
            print(f"{key:16} auto applied: {by_difficulty['all']['auto']['applied']}")
    for key, v in verdict.items():
        for name, b in v.items():
            lo, hi = b["ci95"]
            print(
                f"{key:16} hard {name}: {b['mean']:+.3f} (95% CI {lo:+.3f} .. {hi:+.3f})"
                + ("  excludes 0" if lo > 0 or hi < 0 else "")
            )


if __name__ == "__main__":
    main()
