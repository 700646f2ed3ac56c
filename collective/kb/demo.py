"""The demo knowledge base (3D-printing materials) and the default KB location.

The default KB is `$COLLECTIVE_KB` or `.collective/kb.sqlite`. `open_default_store` builds it
from the demo files the first time it is needed, so `make demo` works on a fresh checkout, with
the expansions packaged beside them (`demo_kb_expansions.json`: no model runs to build it).
Sources of the demo chunks are stored relative to the package data (`demo_kb/pla.md`), so the
chunk ids are the same on every machine.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from collective import environment
from collective.kb.expansion import expand_missing, load_cache
from collective.kb.sqlite_store import SqliteKnowledgeStore

__all__ = [
    "DEFAULT_KB_PATH",
    "default_kb_path",
    "demo_expansions",
    "demo_kb_path",
    "open_default_store",
]

DEFAULT_KB_PATH = environment.KB_PATH


def demo_kb_path() -> Path:
    """The folder holding the demo KB's Markdown files."""
    return Path(str(resources.files("collective") / "data" / "demo_kb"))


def demo_expansions() -> Path:
    """The demo KB's expansions, written once by bench/expansions.py (by content key)."""
    return Path(str(resources.files("collective") / "data" / "demo_kb_expansions.json"))


def default_kb_path() -> Path:
    """`$COLLECTIVE_KB` if set, else `.collective/kb.sqlite` (relative to the working dir)."""
    return environment.kb_path()


def open_default_store(
    path: str | Path | None = None, *, embeddings: str = "builtin"
) -> SqliteKnowledgeStore:
    """Open the KB at `path` (default: `default_kb_path()`), seeding it with the demo KB if new.

    Args:
        path: The KB file; when it does not exist yet it is created from the demo files.
        embeddings: The embedder's spec (the settings' `kb_embeddings`), seeding included.

    Returns:
        The opened store.
    """
    target = Path(path) if path is not None else default_kb_path()
    if not target.exists():
        _seed(target, embeddings)
    return SqliteKnowledgeStore(target, embeddings=embeddings)


def _seed(target: Path, embeddings: str) -> None:
    """Build the demo KB at `target` once, however many processes start at the same time.

    One process at a time holds `<target>.lock`; the first builds the KB in a temporary file
    and moves it into place whole, so no run ever opens a partly seeded KB.
    """
    import fcntl

    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if target.exists():
            return
        building = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        building.unlink(missing_ok=True)
        demo = demo_kb_path()
        with SqliteKnowledgeStore(building, embeddings=embeddings) as store:
            store.add_paths([demo], base=demo.parent, embed=False)
            # The packaged expansions: no model runs when the demo KB is built.
            cache = load_cache(demo_expansions())
            expand_missing(store, None, model="cache", cache=cache)
            store.embed_missing()
        os.replace(building, target)
