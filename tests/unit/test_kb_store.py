"""The SQLite knowledge store and the chunker, on real files."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from collective.errors import ConfigError
from collective.kb.chunking import split_text
from collective.kb.demo import demo_kb_path, open_default_store
from collective.kb.sqlite_store import SqliteKnowledgeStore
from collective.kb.store import Chunk, KnowledgeStore, chunk_id

DOC = """---
tags: filament, Demo
---
# PETG

Intro paragraph about PETG.

## Drying
tags: moisture
Dry PETG at 65 °C for four hours.

Store it with desiccant.

```
# not a heading
```

## Editorial note #meta
Written by the maintainers.
"""


def test_split_text_keeps_heading_paths_tags_and_code() -> None:
    chunks = split_text(DOC)
    assert [c.heading for c in chunks] == ["PETG", "PETG > Drying", "PETG > Editorial note"]
    assert chunks[0].tags == ("filament", "demo")
    assert chunks[1].tags == ("filament", "demo", "moisture")
    assert chunks[2].tags == ("filament", "demo", "meta")
    # Small paragraphs merge; the fenced `#` line stays text, not a heading.
    assert "Store it with desiccant." in chunks[1].text
    assert "# not a heading" in chunks[1].text


def test_split_text_splits_long_paragraphs_at_sentences() -> None:
    sentence = "PLA is stiff and prints easily at low temperature. "
    chunks = split_text("# A\n\n" + sentence * 60, target_chars=300, max_chars=400)
    assert len(chunks) > 3
    assert all(len(c.text) <= 400 for c in chunks)
    assert all(c.text.endswith(".") for c in chunks)


def test_chunk_ids_are_stable_and_content_derived() -> None:
    a = chunk_id("text", "a.md", "H")
    assert a == chunk_id("text", "a.md", "H") and a.startswith("mem_") and len(a) == 20
    assert a != chunk_id("text", "b.md", "H") != chunk_id("other", "a.md", "H")


@pytest.fixture
def kb_file(tmp_path: Path) -> Path:
    path = tmp_path / "docs" / "petg.md"
    path.parent.mkdir()
    path.write_text(DOC, encoding="utf-8")
    return path


def test_add_is_idempotent_and_edits_replace_only_changed_chunks(
    tmp_path: Path, kb_file: Path
) -> None:
    store = SqliteKnowledgeStore(tmp_path / "kb.sqlite")
    first = store.add_paths([kb_file.parent])
    assert (first.files, first.added, first.removed) == (1, 3, 0)
    ids = [c.id for c in store.list()]

    again = store.add_paths([kb_file])
    assert (again.unchanged_files, again.added, again.removed) == (1, 0, 0)
    assert [c.id for c in store.list()] == ids

    kb_file.write_text(DOC.replace("Written by the maintainers.", "Revised note."), "utf-8")
    edited = store.add_file(kb_file)
    assert (edited.added, edited.removed, edited.kept) == (1, 1, 2)
    assert [c.id for c in store.list()][:2] == ids[:2]
    store.close()

    reopened = SqliteKnowledgeStore(tmp_path / "kb.sqlite")  # persistent
    assert reopened.count() == 3
    assert reopened.get(ids[1]) == Chunk(
        id=ids[1],
        text=reopened.get(ids[1]).text,  # type: ignore[union-attr]
        source=str(kb_file.resolve()),
        tags=("filament", "demo", "moisture"),
        heading="PETG > Drying",
    )


def test_remove_by_id_and_by_source(tmp_path: Path, kb_file: Path) -> None:
    store = SqliteKnowledgeStore(tmp_path / "kb.sqlite")
    store.add_file(kb_file)
    target = store.list()[0].id
    assert store.remove(target) == 1
    assert store.get(target) is None
    assert all(c.id != target for c in store.search("intro paragraph", 5))
    # Re-adding the file restores the removed chunk (its hash was forgotten).
    assert store.add_file(kb_file).added == 1
    assert store.remove(source=str(kb_file)) == 3
    assert store.count() == 0 and store.sources() == []


def test_search_scores_are_normalised_ranked_and_deterministic(tmp_path: Path) -> None:
    store = open_default_store(tmp_path / "demo.sqlite")
    hits = store.search("drying nylon filament moisture", 8)
    assert 1 <= len(hits) <= 8
    assert all(0.0 <= c.score <= 1.0 for c in hits)
    assert [c.score for c in hits] == sorted((c.score for c in hits), reverse=True)
    assert "nylon" in (hits[0].heading + hits[0].text).lower()
    assert store.search("drying nylon filament moisture", 8) == hits
    # Equal scores are ordered by id.
    for a, b in zip(hits, hits[1:], strict=False):
        if a.score == b.score:
            assert a.id < b.id
    assert isinstance(store, KnowledgeStore)


def test_a_word_no_chunk_has_does_not_hide_the_words_every_chunk_has(tmp_path: Path) -> None:
    # Both chunks hold "aspirin" (a word in over half the chunks is left out of the match): the
    # rarest word the KB has stands in for it, not "zebra", which no chunk has.
    notes = tmp_path / "notes.md"
    notes.write_text("# Aspirin\n\naspirin inhibits COX\n\n# Dose\n\naspirin dose is low\n")
    with SqliteKnowledgeStore(tmp_path / "kb.sqlite", embedder=None) as store:
        store.add_file(notes)
        assert store.count() == 2
        hits = store.search("aspirin zebra", 5)
    assert hits and all("aspirin" in c.text for c in hits)


def test_a_word_in_more_than_common_chunks_is_not_matched_on_but_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At scale a word in thousands of chunks made FTS5 rank them all (17 of 24 ms a search at
    # 100K chunks); such a word no longer finds candidates, but still scores coverage.
    from collective.kb import sqlite_store

    notes = tmp_path / "notes.md"
    notes.write_text(
        "# A\n\nsteel beams rust\n\n# B\n\nsteel nails\n\n# C\n\nsteel sheet\n\n"
        "# D\n\ncopper pipes\n\n# E\n\nrust on copper\n\n# F\n\nbrass fittings\n"
    )
    with SqliteKnowledgeStore(tmp_path / "kb.sqlite", embedder=None) as store:
        store.add_file(notes)
        assert {c.heading for c in store.search("steel rust", 6)} == {"A", "B", "C", "E"}
        monkeypatch.setattr(sqlite_store, "COMMON_CHUNKS", 2)  # "steel" is in 3
        hits = store.search("steel rust", 6)
    assert [c.heading for c in hits] == ["A", "E"]
    assert hits[0].score > hits[1].score  # A also holds "steel"


@pytest.mark.parametrize("query", ['"', "AND OR NOT", "pla*", "bed:(x)", "-", "   ", "NEAR(a b)"])
def test_search_survives_fts_syntax_in_queries(tmp_path: Path, query: str) -> None:
    store = open_default_store(tmp_path / "demo.sqlite")
    assert isinstance(store.search(query, 5), list)


def test_concurrent_searches_from_threads(tmp_path: Path) -> None:
    store = open_default_store(tmp_path / "demo.sqlite")
    expected = store.search("enclosure warping abs", 5)
    results: list[list[Chunk]] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(20):
                results.append(store.search("enclosure warping abs", 5))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 80 and all(r == expected for r in results)


def test_demo_kb_seeds_once_with_portable_sources(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "kb.sqlite"
    store = open_default_store(path)
    chunks = store.list()
    assert 30 <= len(chunks) <= 80
    assert {c.source.split("/")[0] for c in chunks} == {"demo_kb"}
    assert any("meta" in c.tags for c in chunks)
    assert len({p.name for p in demo_kb_path().glob("*.md")}) >= 5
    store.close()
    assert [c.id for c in open_default_store(path).list()] == [c.id for c in chunks]


def test_missing_or_binary_files_are_config_errors(tmp_path: Path) -> None:
    store = SqliteKnowledgeStore(tmp_path / "kb.sqlite")
    with pytest.raises(ConfigError, match="no such file"):
        store.add_paths([tmp_path / "nope.md"])
    binary = tmp_path / "x.md"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ConfigError, match="not UTF-8"):
        store.add_file(binary)


def test_not_a_database_is_a_config_error(tmp_path: Path) -> None:
    bogus = tmp_path / "kb.sqlite"
    bogus.write_text("this is not sqlite " * 100)
    with pytest.raises(ConfigError, match="cannot open knowledge base"):
        SqliteKnowledgeStore(bogus)
