"""The embedded default knowledge store: one SQLite file with FTS5 (BM25) full-text search.

Needs no server. The store is one class made of parts, each in a module of its own: the tables
and how a KB is recognised (`sqlite_schema`), adding files (`sqlite_ingest`: only what changed is
written), vectors (`sqlite_vectors`), expansions (`sqlite_expansions`), names and figures
(`sqlite_vocabulary`), and what FTS5 would match (`fts`); this module opens the file and
searches it.

Scores: FTS5 finds candidates with OR semantics over the query's content words and ranks them
by BM25 (the heading path weighs double). Each candidate's score is then

    0.7 * coverage + 0.3 * bm25 / best_bm25

where coverage is the IDF-weighted share of the query's content words that the chunk contains.
Coverage makes the score comparable across queries (1.0: every content word present), which the
trust passes of the retrieval profiles rely on; the BM25 part orders chunks of equal coverage.

Dense vectors live in the same file (table `vectors`, float16, one per chunk), computed by the
store's embedder (`collective.kb.embeddings`, named by the caller: the settings'
`kb_embeddings`) when chunks are added, in batches, only for chunks that lack one. The table
`meta` records the embedding model and dimension; a KB whose vectors came from another model is
refused until `collective kb reindex`. `dense_search` scores by cosine similarity over all
vectors held in memory (numpy, brute force).

Expansions (`collective.kb.expansion`): a chunk may have one, the questions and keywords a chat
model wrote for it, stored in `expansions` under the chunk's rowid, with its own FTS5 index and
vector. They only help find the chunk: a chunk found through its expansion is returned as the
chunk (its text, never the expansion's). Lexically a query word counts as present when the chunk
or its expansion has it; densely a chunk scores the better cosine of its own vector and its
expansion's. Deleting a chunk deletes its expansion.
"""

from __future__ import annotations

import builtins
import math
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collective.databases import KB, create_new
from collective.errors import ConfigError
from collective.kb import sqlite_vocabulary
from collective.kb.fts import presence, query_terms
from collective.kb.sqlite_expansions import Expansions
from collective.kb.sqlite_ingest import MAX_FILE_BYTES, TEXT_SUFFIXES, Ingest, IngestStats
from collective.kb.sqlite_schema import APPLICATION_ID, SCHEMA, check_kb_file, row_to_chunk
from collective.kb.sqlite_vectors import EMBED_BATCH, Progress, Vectors
from collective.kb.sqlite_vocabulary import Names
from collective.kb.store import Chunk, rank_chunks

if TYPE_CHECKING:
    import numpy as np

    from collective.kb.embeddings import Embedder
    from collective.kb.names import KbVocabulary

__all__ = [
    "APPLICATION_ID",
    "EMBED_BATCH",
    "MAX_FILE_BYTES",
    "TEXT_SUFFIXES",
    "IngestStats",
    "Progress",
    "SqliteKnowledgeStore",
    "check_kb_file",
    "query_terms",
]

COMMON_SHARE = 0.5
"""A query word found in more than this share of the chunks is not matched on (see `search`)..."""
COMMON_CHUNKS = 5000
"""... nor one found in more than this many: FTS5 ranks every chunk holding a matched word, and
at 100K chunks such words cost 17 of 24 ms CPU a search (measured); their weight in BM25 is
small, they still count towards coverage, and the dense side finds chunks without the rare
words."""

EXPANSION_BM25 = 0.5
"""Weight of an expansion's BM25 (the chunk's own text weighs 1)."""

_UNSET: Any = object()


class SqliteKnowledgeStore(Ingest, Vectors, Expansions, Names):
    """A persistent knowledge store in one SQLite file, searched with FTS5 BM25.

    One connection is shared under a lock, so concurrent calls from threads (or async nodes
    using `asyncio.to_thread`) are safe; SQLite searches take a millisecond or two.
    """

    def __init__(
        self, path: str | Path, *, embedder: Embedder | None = _UNSET, embeddings: str = "builtin"
    ) -> None:
        """Open (creating if needed) the store at `path` (`:memory:` for a throw-away one).

        Args:
            path: The KB file.
            embedder: What computes vectors; default: the one `embeddings` names, loaded
                when first needed; None: lexical only.
            embeddings: The embedder's spec when none is given (the settings'
                `kb_embeddings`: `collective.kb.embeddings.embedder_for`).

        Raises:
            ConfigError: The file cannot be opened as a SQLite knowledge store, or is a SQLite
                database that is not a KB (left untouched).
        """
        self.path = str(path)
        # Before any write: refuses what is not a KB, and says why a new one cannot be made.
        new = self.path == ":memory:" or check_kb_file(self.path)
        if new and self.path != ":memory:":
            create_new(self.path, KB)
        self._lock = threading.RLock()
        # Per-term matching ids and the chunk count, for scoring; valid until the KB changes
        # (our own writes clear it, other connections' commits bump PRAGMA data_version).
        self._stats: dict[str, Any] = {}
        self._data_version = -1
        self._embedder = embedder
        self._embeddings = embeddings
        # data_version, rowids, vectors, chunk count, expansion positions and vectors: for dense
        # search, until the KB changes
        self._matrix: tuple[int, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray] | None = None
        self._sims: tuple[str, np.ndarray, np.ndarray] | None = None  # query, matrix, cosines
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            self._db.executescript(SCHEMA + sqlite_vocabulary.SCHEMA)
            if new:
                self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            note = sqlite_vocabulary.upgrade(self._db)
        except sqlite3.DatabaseError as exc:  # a KB or new (checked above): a place problem
            raise ConfigError(
                f"cannot use knowledge base {self.path} ({exc}): check that it and its folder "
                f"are writable, or use another file, {KB.point_elsewhere}"
            ) from exc
        self.notes: builtins.list[str] = [note] if note else []
        """What opening the KB did to it (an older KB upgraded in place), for the user."""
        self._vocab: tuple[int, KbVocabulary] | None = None
        self._words: dict[str, frozenset[str]] = {}

    @property
    def embedder(self) -> Embedder | None:
        """The store's embedder (given, else the one `embeddings` names), loaded on first use."""
        if self._embedder is _UNSET:
            from collective.kb.embeddings import embedder_for

            self._embedder = embedder_for(self._embeddings)
        return self._embedder

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> SqliteKnowledgeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _changed(self) -> None:
        """Forget what was cached of the KB (this connection wrote to it)."""
        self._stats.clear()
        self._matrix = None
        self._vocab = None

    def _fetch_rowids(self, rowids: Sequence[int]) -> builtins.list[tuple]:
        if not rowids:
            return []
        marks = ",".join("?" * len(rowids))
        return self._db.execute(
            f"SELECT id, source, heading, text, tags, rowid FROM chunks WHERE rowid IN ({marks})",
            list(rowids),
        ).fetchall()

    # -- inspection and removal ----------------------------------------------------------------

    def list(self, source: str | None = None) -> list[Chunk]:
        """All chunks (or one source's), by source then position in the file."""
        sql = "SELECT id, source, heading, text, tags FROM chunks"
        args: tuple[str, ...] = ()
        if source is not None:
            sql += " WHERE source = ?"
            args = (source,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY source, position, id", args).fetchall()
        return [row_to_chunk(r) for r in rows]

    def sources(self) -> builtins.list[tuple[str, int]]:
        """The sources in the store with their chunk counts."""
        with self._lock:
            return [
                (s, n)
                for s, n in self._db.execute("SELECT source, chunks FROM sources ORDER BY source")
            ]

    def count(self) -> int:
        """Number of chunks in the store."""
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def remove(self, ids: str | Sequence[str] | None = None, *, source: str | None = None) -> int:
        """Delete chunks by id, or every chunk of a source.

        Args:
            ids: One id or several.
            source: A stored source label, or a path that resolves to one.

        Returns:
            The number of chunks deleted.
        """
        if isinstance(ids, str):
            ids = [ids]
        deleted = 0
        with self._lock, self._db:
            self._changed()
            if ids:
                for cid in ids:
                    cur = self._db.execute(
                        "DELETE FROM chunks WHERE id = ? RETURNING source", (cid,)
                    )
                    for (src,) in cur.fetchall():
                        deleted += 1
                        # The file is no longer fully present: forget its hash so that
                        # re-adding it restores the removed chunks.
                        self._db.execute(
                            "UPDATE sources SET sha256 = '', chunks = chunks - 1 WHERE source = ?",
                            (src,),
                        )
            if source is not None:
                labels = {source, str(Path(source).resolve())}
                for label in sorted(labels):
                    cur = self._db.execute("DELETE FROM chunks WHERE source = ?", (label,))
                    deleted += cur.rowcount
                    self._db.execute("DELETE FROM sources WHERE source = ?", (label,))
                    self._db.execute("DELETE FROM names WHERE source = ?", (label,))
        return deleted

    # -- KnowledgeStore ------------------------------------------------------------------------

    def get(self, chunk_id: str) -> Chunk | None:
        """The chunk with this id (score 0), or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, source, heading, text, tags FROM chunks WHERE id = ?", (chunk_id,)
            ).fetchone()
        return row_to_chunk(row) if row else None

    def _document_frequency(self, terms: Sequence[str]) -> tuple[int, dict[str, int], bool]:
        """The chunk count, per term the chunks containing it, and whether there are expansions.

        A term counts for a chunk found by it or by its expansion; cached until the KB changes.
        """
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._stats.clear()
            self._data_version = version
        if "" not in self._stats:
            self._stats[""] = int(self._db.execute("SELECT count(*) FROM chunks").fetchone()[0])
            self._stats["\0expanded"] = bool(
                self._db.execute("SELECT 1 FROM expansions LIMIT 1").fetchone()
            )
        expanded = bool(self._stats["\0expanded"])
        tables = ("chunks_fts", "expansions_fts") if expanded else ("chunks_fts",)
        for term in terms:
            if term not in self._stats:
                # With expansions: chunks plus expansions holding it (an upper bound, cheaper
                # than their union), at most every chunk.
                self._stats[term] = min(
                    self._stats[""],
                    sum(
                        int(
                            self._db.execute(
                                f"SELECT count(*) FROM {table} WHERE {table} MATCH ?",
                                (f'"{term}"',),
                            ).fetchone()[0]
                        )
                        for table in tables
                    ),
                )
        return self._stats[""], {t: self._stats[t] for t in terms}, expanded

    def search(self, query: str, k: int) -> builtins.list[Chunk]:
        """The best `k` chunks for `query`, scored 0..1 (see the module docstring).

        FTS5 ranks rowids alone (no join until the candidates are known), and which terms a
        candidate holds is read from its own text (`_presence`): a query costs milliseconds,
        not a pass over every matching chunk, at 100K chunks.
        """
        terms = query_terms(query)
        if not terms or k <= 0:
            return []
        with self._lock:
            total, df, expanded = self._document_frequency(terms)
            # Words in most chunks (idf ~ 0) decide nothing but make FTS5 rank every chunk
            # that has them: they are left out of the match (the rarest word the KB has always
            # stays; a word no chunk has matches nothing and cannot stand in for it).
            found = [t for t in terms if df[t]]
            if not found:
                return []
            common = min(COMMON_SHARE * total, COMMON_CHUNKS)
            useful = [t for t in found if df[t] <= common]
            match = " OR ".join(f'"{t}"' for t in useful or [min(found, key=df.__getitem__)])
            limit = max(k * 2, k + 10)
            ranked = self._db.execute(
                "SELECT rowid, bm25(chunks_fts, 2.0, 1.0, 1.0) AS score FROM chunks_fts "
                "WHERE chunks_fts MATCH ? ORDER BY score, rowid LIMIT ?",
                (match, limit),
            ).fetchall()
            if expanded:
                # An expansion's BM25 counts for less than the chunk's own text.
                found_by_expansion = self._db.execute(
                    "SELECT rowid, bm25(expansions_fts) * ? AS score FROM expansions_fts "
                    "WHERE expansions_fts MATCH ? ORDER BY score, rowid LIMIT ?",
                    (EXPANSION_BM25, match, limit),
                ).fetchall()
                best_of = dict(found_by_expansion)
                for rowid, score in ranked:
                    best_of[rowid] = min(score, best_of.get(rowid, 0.0))
                ranked = sorted(best_of.items(), key=lambda r: (r[1], r[0]))[:limit]
            if not ranked:
                return []
            bm25 = dict(ranked)
            rows = self._fetch_rowids(list(bm25))
            # Which query words each candidate holds is read from its text (asking FTS5 term by
            # term walks a common word's whole list: 16 of 48 ms a query at 100K chunks).
            texts = {row[5]: f"{row[2]} {row[3]} {row[4] or ''}" for row in rows}
            if expanded:
                marks = ",".join("?" * len(bm25))
                for rowid, text in self._db.execute(
                    f"SELECT rowid, text FROM expansions WHERE rowid IN ({marks})", list(bm25)
                ):
                    texts[rowid] += "\n" + text
        present = presence(texts, terms)
        idf = {t: math.log(1.0 + (total - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        idf_sum = sum(idf.values()) or 1.0
        best = max(-b for b in bm25.values()) or 1.0
        scored = []
        for row in rows:
            rowid = row[5]
            coverage = sum(idf[t] for t in terms if rowid in present[t]) / idf_sum
            score = 0.7 * coverage + 0.3 * (-bm25[rowid] / best)
            scored.append(row_to_chunk(row, round(score, 6)))
        return rank_chunks(scored)[:k]
