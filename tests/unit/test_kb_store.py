"""The SQLite knowledge store and the chunker, on real files."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from collective.errors import ConfigError
from collective.kb.chunking import split_text
from collective.kb.demo import demo_kb_path, open_default_store
from collective.kb.sqlite_store import SqliteKnowledgeStore
from collective.kb.store import Chunk, DenseResult, KnowledgeStore, chunk_id
from tests.fakes import HashingEmbedder

EVAL_KB = Path(__file__).parents[1] / "data" / "eval_kb"

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


def test_a_query_word_counts_as_present_in_a_chunk_where_fts5_matches_it() -> None:
    # Which query words a candidate holds is read from its text, not asked of FTS5 word by word
    # (that walked a common word's whole list: 16 of 48 ms a search at 100K chunks); it must
    # agree with FTS5's porter tokenizer on every word of the eval KB, in every form.
    import sqlite3

    from collective.kb import fts

    texts = {
        i: text
        for i, text in enumerate(
            sorted(p.read_text(encoding="utf-8") for p in EVAL_KB.rglob("*.md")), start=1
        )
    }
    texts[len(texts) + 1] = "İstanbul Café crème: the PETG part drooped; dyeing isn't 6061-T6"
    texts[len(texts) + 1] = "analogies"  # after a text folding lengthens ("İ" lower-cases to two)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
    db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", texts.items())
    words = sorted({w.lower() for text in texts.values() for w in fts._TOKEN.findall(text)})
    words += [
        "istanbul",
        "cafe",
        "CAFÉ",
        "droop",
        "drooping",
        "dye",
        "analogy",
        "t6",
        "isn't",
        "aren't",
    ]
    present = fts.presence(texts, words)
    disagree = [
        w
        for w in words
        if present[w]
        != {r for (r,) in db.execute("SELECT rowid FROM t WHERE t MATCH ?", (f'"{w}"',))}
    ]
    assert len(words) > 1000
    assert not disagree
    for word in ("istanbul", "cafe", "CAFÉ", "droop", "drooping", "dye", "t6", "isn't"):
        assert len(texts) - 1 in present[word], word
    assert len(texts) in present["analogy"]


def test_the_dense_side_embeds_and_multiplies_while_a_search_holds_the_store(
    tmp_path: Path,
) -> None:
    # A retrieval runs its lexical search and dense search at once. The dense side took the
    # store's lock (to check the model) before embedding the query, so it waited for the whole
    # search: balanced cost the sum of the two sides (108 ms p95 at 100K chunks).
    embedded = threading.Event()

    class Recorded(HashingEmbedder):
        def embed(self, texts: list[str]) -> np.ndarray:
            if "tight glue" in texts:
                embedded.set()
            return super().embed(texts)

    notes = tmp_path / "notes.md"
    notes.write_text("# Cedar\n\ncedar weathers grey\n\n# Glue\n\nglue needs tight joints\n")
    store = SqliteKnowledgeStore(tmp_path / "kb.sqlite", embedder=Recorded())
    store.add_file(notes)
    assert store.dense_search("grey cedar", 1).hits  # the vectors are read into memory once
    found: list[DenseResult] = []
    with store._lock:  # a search in progress on another thread
        worker = threading.Thread(target=lambda: found.append(store.dense_search("tight glue", 1)))
        worker.start()
        assert embedded.wait(timeout=20), "the dense side waited for the search to embed"
        for _ in range(200):  # the product, cached for the second call of a retrieval
            if store._sims is not None and store._sims[0] == "tight glue":
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the dense side waited for the search to multiply")
    worker.join(timeout=20)
    assert found and found[0].hits[0].heading == "Glue"
    store.close()


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
