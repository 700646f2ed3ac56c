"""Retrieval at scale: a KB of 100K synthetic chunks, retrieve latency per profile.

Writes 100,000 synthetic chunks (1,000 Markdown files of 100 sections, 90 words each drawn
from a Zipf-like 6,000-word vocabulary of whole English words) and ingests them into a
temporary SQLite KB. Computing 100K real embeddings would take hours on two busy cores, so:

* the ingest rate with vectors (chunks/s) is measured on the first 300 chunks with the real
  model, in a KB of their own;
* the 100K KB is ingested lexically (its rate is reported too) and then given 100K random unit
  vectors (float16, 384 dimensions, as the model's): brute-force search costs the same whatever
  the values;
* unless `--no-expansions`, every chunk also gets an expansion as `kb add` writes them (three
  questions and keywords, 30 words drawn from the same vocabulary, indexed by FTS5) with a
  random vector of its own: the lexical search then reads two indexes and the dense one
  twice the vectors.

Then it runs `--queries` distinct queries (each query embedded for real: no cache hit) under
lean, balanced and deep and reports p50/p95 latency, wall and CPU time (retrieval runs on one
thread, so its CPU time is what an idle core would take, whatever else loads the machine), and
the KB's size per 1K chunks.

Deep includes its LLM reranker (seconds a query: 60 deep queries take minutes); set
`COLLECTIVE_RERANK=none` to time the search alone.

Run: .venv/bin/python bench/retrieval_scale.py [--chunks 100000] [--queries 60] [--json]
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collective.kb.embeddings import BUILTIN_MODEL, MiniLMEmbedder  # noqa: E402
from collective.kb.retrieval import retrieve  # noqa: E402
from collective.kb.sqlite_store import SqliteKnowledgeStore  # noqa: E402

SECTIONS = 100
WORDS = 90
"""Words per chunk: about 100 model tokens with the heading, like the demo KB's chunks."""
SAMPLE = 300
"""Chunks ingested with real vectors to measure that rate."""
TOPICS = "heat strength drying warping finishing corrosion cost machining gluing outdoor".split()


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    """English words the model knows whole (one token each), in a fixed random order."""
    from collective.kb.embeddings import _package_file

    lines = _package_file("vocab.txt").read_text(encoding="utf-8").splitlines()
    words = sorted(w for w in lines if w.isalpha() and w.isascii() and len(w) >= 4)
    rng.shuffle(words)
    return words[:size]


def write_corpus(folder: Path, chunks: int, rng: random.Random) -> None:
    words = vocabulary(rng)
    weights = [1.0 / (i + 1) for i in range(len(words))]
    for f in range(chunks // SECTIONS):
        name = f"material {words[f % len(words)]} {f}"
        parts = [f"# {name}\n"]
        for s in range(SECTIONS):
            topic = TOPICS[s % len(TOPICS)]
            body = " ".join(rng.choices(words, weights, k=WORDS))
            parts.append(f"## {topic} {s}\nThe {topic} of {name}: {body}.\n")
        (folder / f"m{f:05d}.md").write_text("\n".join(parts), encoding="utf-8")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def build(tmp: Path, path: Path, chunks: int, rng: random.Random, expansions: bool) -> dict:
    """Write the corpus, measure both ingest rates, and leave the 100K KB at `path`."""
    out: dict = {}
    corpus = tmp / "corpus"
    corpus.mkdir()
    write_corpus(corpus, chunks, rng)
    files = sorted(corpus.iterdir())

    # Ingest with real vectors, on the first SAMPLE chunks.
    sample = SqliteKnowledgeStore(tmp / "sample.sqlite")
    started = time.perf_counter()
    (tmp / "sample").mkdir()
    first = files[0].read_text(encoding="utf-8").split("\n## ")
    (tmp / "sample" / "s.md").write_text("\n## ".join(first[: SAMPLE + 1]), "utf-8")
    sample.add_paths([tmp / "sample"])
    seconds = time.perf_counter() - started
    out["ingest_with_vectors_chunks_per_s"] = round(sample.count() / seconds, 1)
    sample.close()

    # The full KB: lexical ingest, then random unit vectors.
    lexical = SqliteKnowledgeStore(path, embedder=None)
    started = time.perf_counter()
    lexical.add_paths(files)
    seconds = time.perf_counter() - started
    count = lexical.count()
    out["ingest_lexical_chunks_per_s"] = round(count / seconds, 1)
    vectors = np.random.default_rng(26).standard_normal((count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with lexical._db:  # the bench writes the table directly: see the module docstring
        rowids = [r[0] for r in lexical._db.execute("SELECT rowid FROM chunks ORDER BY rowid")]
        lexical._db.executemany(
            "INSERT INTO vectors(rowid, vec) VALUES (?, ?)",
            [(r, v.astype("<f2").tobytes()) for r, v in zip(rowids, vectors, strict=True)],
        )
        lexical._db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('embedding_model', ?), "
            "('embedding_dim', '384')",
            (BUILTIN_MODEL,),
        )
        if expansions:
            words = vocabulary(rng)
            weights = [1.0 / (i + 1) for i in range(len(words))]

            def question() -> str:
                return "why does my " + " ".join(rng.choices(words, weights, k=8)) + "?"

            lexical._db.executemany(
                "INSERT INTO expansions(rowid, text, model, seconds) VALUES (?, ?, 'synthetic', 0)",
                [
                    (r, "\n".join([question(), question(), question()] + rng.choices(words, k=6)))
                    for r in rowids
                ],
            )
            extra = np.random.default_rng(40).standard_normal((count, 384)).astype(np.float32)
            extra /= np.linalg.norm(extra, axis=1, keepdims=True)
            lexical._db.executemany(
                "INSERT INTO expansion_vectors(rowid, vec) VALUES (?, ?)",
                [(r, v.astype("<f2").tobytes()) for r, v in zip(rowids, extra, strict=True)],
            )
    lexical.close()

    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, help="Build the KB here once; later runs reuse it.")
    parser.add_argument(
        "--no-expansions", action="store_true", help="Chunks without expansions (as before)."
    )
    args = parser.parse_args()
    rng = random.Random(26)
    out: dict = {"chunks": args.chunks, "load": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "kb.sqlite"
        if not path.exists():
            out.update(build(Path(tmp), path, args.chunks, rng, not args.no_expansions))
        out["expansions"] = SqliteKnowledgeStore(path, embedder=None).expansion_status()[0]
        out["kb_mb_per_1k_chunks"] = round(
            path.stat().st_size / 1e6 / (SqliteKnowledgeStore(path).count() / 1000), 3
        )
        store = SqliteKnowledgeStore(path, embedder=MiniLMEmbedder())
        words = vocabulary(random.Random(26))
        started = time.perf_counter()
        retrieve(store, "warm up the vector matrix", "balanced")
        out["first_query_ms"] = round((time.perf_counter() - started) * 1000, 1)
        for profile in ("lean", "balanced", "deep"):
            latencies, cpu = [], []
            for i in range(args.queries):
                query = f"{TOPICS[i % len(TOPICS)]} of {' '.join(rng.sample(words[:600], 3))} {i}"
                query += f" {profile}"  # distinct per profile: every query is embedded anew
                started_cpu = time.process_time()
                latencies.append(retrieve(store, query, profile).latency_ms)
                cpu.append((time.process_time() - started_cpu) * 1000)
            out[profile] = {
                "p50_ms": round(statistics.median(latencies), 1),
                "p95_ms": round(percentile(latencies, 95), 1),
                "cpu_p50_ms": round(statistics.median(cpu), 1),
                "cpu_p95_ms": round(percentile(cpu, 95), 1),
            }
        store.close()
    out["load_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(
        f"{out['chunks']} chunks; ingest {out.get('ingest_with_vectors_chunks_per_s', '-')} "
        f"chunks/s with vectors, {out.get('ingest_lexical_chunks_per_s', '-')} chunks/s lexical; "
        f"{out['kb_mb_per_1k_chunks']} MB per 1K chunks; first query {out['first_query_ms']} ms; "
        f"{out['expansions']} expansions; load {out['load']:.1f} -> {out['load_after']:.1f}"
    )
    for profile in ("lean", "balanced", "deep"):
        m = out[profile]
        print(
            f"{profile:9} wall p50 {m['p50_ms']:7.1f} ms  p95 {m['p95_ms']:7.1f} ms; "
            f"CPU p50 {m['cpu_p50_ms']:7.1f} ms  p95 {m['cpu_p95_ms']:7.1f} ms"
        )


if __name__ == "__main__":
    main()
