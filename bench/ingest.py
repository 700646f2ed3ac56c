"""`kb add` with expansions and names, batched (as shipped) against one chunk at a time.

Each arm builds a fresh KB of the same folder the way `collective kb add` does (files added,
then every document named and every chunk expanded by the local model, then the vectors), with
no expansion cache, so every expansion is written by the model. The arms differ only in how many
chunks (and documents) are asked for at once: `EXPANSION_BATCH`, decoded together by the
in-process engine, or one. The model is loaded once before either arm is timed.

Run: .venv/bin/python bench/ingest.py [FOLDER] [--limit-files N] [--arms batched,one]
         [--batch N] [--keep FILE.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collective.kb import expansion  # noqa: E402
from collective.kb.sqlite_store import SqliteKnowledgeStore  # noqa: E402


def build(
    folder: Path, work: Path, batch: int, expander: object, namer: object, keep: Path | None
) -> dict:
    """One `kb add` of `folder` into a new KB under `work`; the time of each stage.

    With `keep`, the expansions written are saved there as a cache (`expansion.load_cache`).
    """
    path = work / f"kb-{batch}.sqlite"
    path.unlink(missing_ok=True)
    times: dict[str, float] = {}
    started = time.perf_counter()
    with SqliteKnowledgeStore(path) as store:
        for file in sorted(p for p in folder.rglob("*.md")):
            store.add_file(file, embed=False)
        times["files_s"] = time.perf_counter() - started
        mark = time.perf_counter()
        stats = expansion.expand_missing(
            store,
            expander,  # type: ignore[arg-type]
            model=expansion.DEFAULT_EXPANSION_MODEL,
            namer=namer,  # type: ignore[arg-type]
            batch=batch,
        )
        times["names_and_expansions_s"] = time.perf_counter() - mark
        mark = time.perf_counter()
        vectors = store.embed_missing()
        times["vectors_s"] = time.perf_counter() - mark
        chunks = store.count()
        if keep is not None:
            rows = store._db.execute(
                "SELECT c.heading, c.text, e.text FROM chunks c JOIN expansions e "
                "ON e.rowid = c.rowid ORDER BY c.source, c.position"
            ).fetchall()
            cache = {
                "model": expansion.DEFAULT_EXPANSION_MODEL,
                "prompt_sha256": hashlib.sha256(expansion.PROMPT.encode()).hexdigest()[:16],
                "chunks": len(rows),
                "expansions": {expansion.content_key(h, t): e for h, t, e in rows},
            }
            keep.write_text(json.dumps(cache, indent=1, ensure_ascii=False) + "\n")
    times["total_s"] = time.perf_counter() - started
    return {
        "batch": batch,
        "chunks": chunks,
        "expanded": stats.generated,
        "empty": stats.empty,
        "documents_named": stats.named,
        "vectors": vectors,
        **{k: round(v, 1) for k, v in times.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, nargs="?", default=ROOT / "tests/data/eval_kb")
    parser.add_argument("--limit-files", type=int, default=0, help="The first N files only.")
    parser.add_argument("--arms", default="batched,one", help="batched, one, or both.")
    parser.add_argument("--batch", type=int, default=expansion.EXPANSION_BATCH)
    parser.add_argument("--keep", type=Path, help="Write the batched arm's expansions here.")
    args = parser.parse_args()

    backend = expansion.configured_expander(expansion.DEFAULT_EXPANSION_MODEL)[0]
    namer = expansion.backend_namer(backend.backend)  # type: ignore[union-attr]
    backend("warm-up", "A line.")  # type: ignore[misc]  # load the model outside the timing
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = args.folder
        if args.limit_files:
            folder = work / "files"
            for file in sorted(args.folder.rglob("*.md"))[: args.limit_files]:
                target = folder / file.relative_to(args.folder)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(file, target)
        rows = []
        for arm in args.arms.split(","):
            batch = args.batch if arm == "batched" else 1
            load = os.getloadavg()[0]
            row = {"arm": arm, "load_before": round(load, 2)}
            row |= build(
                folder, work, batch, backend, namer, args.keep if arm == "batched" else None
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
    if len(rows) == 2 and rows[0]["total_s"]:
        print(f"one-at-a-time / batched total: {rows[1]['total_s'] / rows[0]['total_s']:.2f}")


if __name__ == "__main__":
    main()
