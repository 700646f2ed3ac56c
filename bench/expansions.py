"""Write the expansion cache of a folder of KB files: what `kb add` would generate, kept.

The local chat model (greedy decoding, so the same model and prompt give the same text) writes
each chunk's expansion (`collective.kb.expansion`); the cache maps each chunk's content key to
it, so a KB built from these files later (the demo KB, the eval KB, test fixtures) takes them
without a model. The work goes through a KB file in the cache
(`~/.cache/collective/bench/OUT.work.sqlite`): an interrupted run goes on where it stopped, and
the cache is rewritten after every group of `--parallel` chunks (decoded together by the
in-process engine).

Run: .venv/bin/python bench/expansions.py DIR --base BASE --out FILE.json [--model SPEC]
e.g. bench/expansions.py tests/data/eval_kb --base tests/data \
         --out tests/data/eval_kb_expansions.json
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collective.kb import expansion  # noqa: E402
from collective.kb.sqlite_store import SqliteKnowledgeStore  # noqa: E402


def dump(store: SqliteKnowledgeStore, out: Path, model: str, wall_s: float) -> dict:
    """Write the cache of every expansion the work KB holds; returns its summary."""
    rows = store._db.execute(
        "SELECT c.heading, c.text, e.text, e.seconds FROM chunks c "
        "JOIN expansions e ON e.rowid = c.rowid ORDER BY c.source, c.position"
    ).fetchall()
    seconds = [s for *_, s in rows if s > 0]
    summary = {
        "model": model,
        "decoding": f"greedy (temperature 0: no seed), max {expansion.MAX_TOKENS} tokens",
        "prompt_sha256": hashlib.sha256(expansion.PROMPT.encode()).hexdigest()[:16],
        "chunks": len(rows),
        "per_chunk_s_mean": round(statistics.mean(seconds), 2) if seconds else None,
        "per_chunk_s_median": round(statistics.median(seconds), 2) if seconds else None,
    }
    data = {
        **summary,
        "expansions": {expansion.content_key(h, t): e for h, t, e, _ in rows},
    }
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=False) + "\n")
    return {**summary, "wall_s_this_run": round(wall_s, 1)}


async def generate(
    store: SqliteKnowledgeStore,
    backend: object,
    model: str,
    known: dict[str, str],
    parallel: int,
    out: Path,
    limit: int,
) -> None:
    """Expand the chunks without one, `parallel` at a time (the in-process engine decodes
    concurrent calls in one batch), committing each and rewriting `out` after each group."""
    todo = store.unexpanded()
    started = time.perf_counter()
    for rowid, _, heading, text in todo:  # cached first: no model needed for those
        if (cached := known.get(expansion.content_key(heading, text))) is not None:
            store.set_expansion(rowid, expansion.clean_expansion(cached), "cache")
    # A seeded shuffle: a run cut short leaves a random sample expanded, not the first files.
    todo = store.unexpanded()
    random.Random(40).shuffle(todo)
    todo = todo[: limit or None]
    for start in range(0, len(todo), parallel):
        group = todo[start : start + parallel]
        headers = [expansion.contextual_header(source, heading) for _, source, heading, _ in group]
        group_started = time.perf_counter()
        replies = await asyncio.gather(
            *(
                backend.chat(  # type: ignore[attr-defined]
                    [{"role": "user", "content": expansion.prompt(header, text)}],
                    max_tokens=expansion.MAX_TOKENS,
                    temperature=0.0,
                )
                for header, (_, _, _, text) in zip(headers, group, strict=True)
            )
        )
        # Wall time per chunk: the group decodes together.
        seconds = (time.perf_counter() - group_started) / len(group)
        for header, (rowid, *_), reply in zip(headers, group, replies, strict=True):
            written = expansion.clean_expansion(reply.text)
            text = expansion.clean_expansion(f"{header}\n{written}") if written else ""
            store.set_expansion(rowid, text, model, seconds)
        summary = dump(store, out, model, time.perf_counter() - started)
        print(f"{start + len(group)}/{len(todo)}: {summary}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default=expansion.DEFAULT_EXPANSION_MODEL)
    parser.add_argument("--parallel", type=int, default=4, help="Chunks decoded together.")
    parser.add_argument("--limit", type=int, default=0, help="Stop after this many (0: all).")
    args = parser.parse_args()

    from collective.models.registry import backend_from_spec

    work = Path.home() / ".cache" / "collective" / "bench" / f"{args.out.stem}.work.sqlite"
    work.parent.mkdir(parents=True, exist_ok=True)
    store = SqliteKnowledgeStore(work, embedder=None)
    store.add_paths([args.folder], base=args.base)
    # Expansions already in the output are kept, not written again.
    known = expansion.load_cache(args.out)
    backend = backend_from_spec(args.model)
    asyncio.run(generate(store, backend, args.model, known, args.parallel, args.out, args.limit))
    print(dump(store, args.out, args.model, 0.0))


if __name__ == "__main__":
    main()
