"""The shipped evaluation set is consistent with what the store ingests today."""

from __future__ import annotations

import json
from pathlib import Path

from collective.kb.sqlite_store import SqliteKnowledgeStore

DATA = Path(__file__).resolve().parents[1] / "data"


def test_eval_set_size_and_labels_match_ingestion(tmp_path: Path) -> None:
    doc = json.loads((DATA / "eval_queries.json").read_text(encoding="utf-8"))
    store = SqliteKnowledgeStore(tmp_path / "eval.sqlite", embedder=None)  # labels only
    store.add_paths([DATA / "eval_kb"], base=DATA)
    ids = {c.id for c in store.list()}
    assert store.count() == doc["chunks"] >= 300
    queries = doc["queries"]
    assert len(queries) >= 60
    assert {q["difficulty"] for q in queries} == {"easy", "hard"}
    assert sum(q["difficulty"] == "hard" for q in queries) >= 30
    for q in queries:
        assert q["relevant"] and set(q["relevant"]) <= ids, q["id"]
