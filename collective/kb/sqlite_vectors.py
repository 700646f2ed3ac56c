"""The SQLite KB's dense vectors: computed in committed batches, searched by cosine in memory.

Each chunk's vector (and its expansion's) is stored float16 in `vectors` (`expansion_vectors`);
`meta` records the embedding model and dimension, and a KB whose vectors came from another model
is refused until `collective kb reindex`. `dense_search` multiplies the query's vector with all
vectors held in memory (numpy, brute force), a chunk scoring the better of its own and its
expansion's cosine.
"""

from __future__ import annotations

import builtins
import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from collective.errors import ConfigError
from collective.kb.sqlite_schema import row_to_chunk
from collective.kb.store import DenseResult, rank_chunks

if TYPE_CHECKING:
    import sqlite3

    import numpy as np

    from collective.kb.embeddings import Embedder

__all__ = ["EMBED_BATCH", "Progress", "Vectors", "embedding_text"]

EMBED_BATCH = 64
"""Chunks embedded and committed at a time (an interrupted `kb add` keeps finished batches)."""

Progress = Callable[[int, int], None]
"""`(done, total)` chunks embedded so far, called after each batch."""


class Vectors:
    """The vector methods of `SqliteKnowledgeStore` (a part of it, not a store of its own)."""

    path: str
    _db: sqlite3.Connection
    _lock: threading.RLock
    _matrix: tuple[int, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray] | None
    _sims: tuple[str, np.ndarray, np.ndarray] | None

    if TYPE_CHECKING:

        @property
        def embedder(self) -> Embedder | None:
            """`SqliteKnowledgeStore.embedder`."""
            ...

        def _changed(self) -> None: ...

        def _fetch_rowids(self, rowids: Sequence[int]) -> builtins.list[tuple]: ...

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def vector_status(self) -> tuple[str | None, int, int]:
        """`(model, chunks with a vector, chunks)`: the model is None before any vector."""
        with self._lock:
            model = self._meta("embedding_model")
            vectors = int(self._db.execute("SELECT count(*) FROM vectors").fetchone()[0])
            chunks = int(self._db.execute("SELECT count(*) FROM chunks").fetchone()[0])
        return model, vectors, chunks

    def check_model(self) -> Embedder | None:
        """The embedder, after checking that the KB's vectors came from it.

        Returns:
            None when this store computes no vectors (lexical only).

        Raises:
            ConfigError: The KB's vectors came from another model (the fix: `kb reindex`).
        """
        embedder = self.embedder
        if embedder is None:
            return None
        with self._lock:
            model, dim = self._meta("embedding_model"), self._meta("embedding_dim")
        if model is not None and model != embedder.name:
            raise ConfigError(
                f"knowledge base {self.path} holds vectors of the embedding model {model!r} "
                f"({dim} dimensions), but the configured model is {embedder.name!r}; run "
                f"`collective kb reindex --kb {self.path}` to recompute them, or set "
                "COLLECTIVE_KB_EMBEDDINGS to the KB's model"
            )
        return embedder

    def embed_missing(self, progress: Progress | None = None) -> int:
        """Compute the vectors of chunks that lack one, in committed batches.

        Chunks go shortest first, so that each batch holds texts of similar length and pads
        little (a file's mixed lengths padded to the longest of each batch otherwise).

        Args:
            progress: Called with `(done, total)` after each batch.

        Returns:
            The number of vectors computed (0 when the store computes none).

        Raises:
            ConfigError: The KB's vectors came from another model.
            CollectiveError: The embedder failed (finished batches stay).
        """
        embedder = self.check_model()
        if embedder is None:
            return 0
        with self._lock:
            todo = [
                ("vectors", "chunks", rowid, embedding_text(h, t))
                for rowid, h, t in self._db.execute(
                    "SELECT c.rowid, c.heading, c.text FROM chunks c "
                    "LEFT JOIN vectors v ON v.rowid = c.rowid WHERE v.rowid IS NULL "
                    "ORDER BY length(c.heading) + length(c.text), c.rowid"
                )
            ] + [
                ("expansion_vectors", "expansions", rowid, text)
                for rowid, text in self._db.execute(
                    "SELECT e.rowid, e.text FROM expansions e "
                    "LEFT JOIN expansion_vectors v ON v.rowid = e.rowid "
                    "WHERE v.rowid IS NULL AND e.text != '' "
                    "ORDER BY length(e.text), e.rowid"
                )
            ]
        done = 0
        for start in range(0, len(todo), EMBED_BATCH):
            batch = todo[start : start + EMBED_BATCH]
            vectors = embedder.embed([text for *_, text in batch])
            with self._lock, self._db:
                self._changed()
                self._db.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('embedding_model', ?), "
                    "('embedding_dim', ?)",
                    (embedder.name, str(vectors.shape[1])),
                )
                for table, owner, rowid, v in (
                    (table, owner, rowid, v)
                    for (table, owner, rowid, _), v in zip(batch, vectors, strict=True)
                ):
                    self._db.execute(
                        f"INSERT OR REPLACE INTO {table}(rowid, vec) SELECT ?, ? "
                        f"WHERE EXISTS (SELECT 1 FROM {owner} WHERE rowid = ?)",
                        (rowid, v.astype("<f2").tobytes(), rowid),
                    )
            done += len(batch)
            if progress is not None:
                progress(done, len(todo))
        return done

    def reindex(self, progress: Progress | None = None) -> int:
        """Drop every vector and compute them again with the store's embedder.

        Returns:
            The number of vectors computed.
        """
        embedder = self.embedder
        if embedder is None:
            raise ConfigError(
                "no embedding model is configured (COLLECTIVE_KB_EMBEDDINGS=none); set it to "
                "builtin or a server to compute vectors"
            )
        with self._lock, self._db:
            self._changed()
            self._db.execute("DELETE FROM vectors")
            self._db.execute("DELETE FROM expansion_vectors")
            self._db.execute("DELETE FROM meta WHERE key LIKE 'embedding_%'")
        return self.embed_missing(progress)

    def _vectors(
        self, checked: bool = True
    ) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
        """All rowids and vectors (float32), the chunk count, and the expansions' vectors.

        Each expansion vector comes with its chunk's position among the rowids; all cached
        until the KB changes. Unless `checked`, what is cached is returned without asking SQLite
        whether it still holds (the caller asks later).
        """
        import numpy as np

        def load(table: str) -> tuple[np.ndarray, np.ndarray]:
            rows = self._db.execute(f"SELECT rowid, vec FROM {table} ORDER BY rowid").fetchall()
            ids = np.array([r[0] for r in rows], dtype=np.int64)
            dim = len(rows[0][1]) // 2 if rows else 0
            blob = b"".join(r[1] for r in rows)
            return ids, np.frombuffer(blob, dtype="<f2").reshape(len(rows), dim).astype(np.float32)

        cached = self._matrix
        if cached is not None and not checked:
            return cached[1:]
        with self._lock:
            # Our own writes clear the cache; other connections' commits bump data_version.
            key = self._db.execute("PRAGMA data_version").fetchone()[0]
            if self._matrix is not None and self._matrix[0] == key:
                return self._matrix[1:]
            rowids, matrix = load("vectors")
            chunks = int(self._db.execute("SELECT count(*) FROM chunks").fetchone()[0])
            exp_ids, exp_matrix = load("expansion_vectors")
            at = np.searchsorted(rowids, exp_ids)  # rowids are sorted
            kept = (at < len(rowids)) & (rowids[np.minimum(at, len(rowids) - 1)] == exp_ids)
            if not len(rowids) or exp_matrix.shape[1] != matrix.shape[1]:
                kept = np.zeros(len(exp_ids), dtype=bool)
            self._matrix = (key, rowids, matrix, chunks, at[kept], exp_matrix[kept])
            return self._matrix[1:]

    def dense_search(self, query: str, k: int, also: Sequence[str] = ()) -> DenseResult:
        """The `k` chunks nearest to `query` by cosine similarity, and the similarity of `also`.

        Returns:
            Hits (score: cosine, clamped to 0..1) and a note saying why there are none, or
            that some chunks lack vectors.

        Raises:
            ConfigError: The KB's vectors came from another model.
        """
        import numpy as np

        if self.embedder is None:
            return DenseResult(note="dense off: no embedding model configured (lexical only)")
        # The query is embedded and multiplied by the vectors in memory before the store's lock
        # is taken: a search on another thread holds it (the lexical and dense sides of a
        # retrieval run at once). Whether the KB changed meanwhile is asked after.
        vectors = self._vectors(checked=False)
        vector = _query_vector(self.embedder, query)
        while True:
            rowids, matrix, chunks, exp_at, exp_matrix = vectors
            if len(rowids) and vector.shape[0] == matrix.shape[1]:
                sims = self._similarities(query, vector, matrix, exp_at, exp_matrix)
            vectors = self._vectors()
            if vectors[1] is matrix:
                break
        if not len(rowids):
            return DenseResult(
                note=f"dense off: the KB has no vectors; add them with `collective kb reindex "
                f"--kb {self.path}` (lexical only until then)"
            )
        if vector.shape[0] != matrix.shape[1]:
            self.check_model()  # another model's vectors: its error says so
            raise ConfigError(
                f"the KB's vectors have {matrix.shape[1]} dimensions, the model gives "
                f"{vector.shape[0]}; run `collective kb reindex --kb {self.path}`"
            )
        self.check_model()
        k = min(k, len(sims))
        top = np.argpartition(-sims, k - 1)[:k] if k else np.array([], dtype=np.int64)
        with self._lock:
            wanted = {int(rowids[i]): float(sims[i]) for i in top}
            rows = self._fetch_rowids(list(wanted))
            similarity = {}
            if also:
                marks = ",".join("?" * len(also))
                pairs = self._db.execute(
                    f"SELECT id, rowid FROM chunks WHERE id IN ({marks})", list(also)
                ).fetchall()
                at = np.searchsorted(rowids, [r for _, r in pairs])  # rowids are sorted
                similarity = {
                    cid: float(sims[i])
                    for (cid, r), i in zip(pairs, at, strict=True)
                    if i < len(rowids) and rowids[i] == r
                }
        hits = rank_chunks([row_to_chunk(row, round(max(0.0, wanted[row[5]]), 6)) for row in rows])
        note = ""
        if len(rowids) < chunks:
            note = (
                f"{chunks - len(rowids)} of {chunks} chunks have no vector; "
                f"`collective kb reindex --kb {self.path}` adds them"
            )
        similarity.update((c.id, c.score) for c in hits)
        return DenseResult(hits=hits, similarity=similarity, note=note)

    def _similarities(
        self,
        query: str,
        vector: np.ndarray,
        matrix: np.ndarray,
        exp_at: np.ndarray,
        exp_matrix: np.ndarray,
    ) -> np.ndarray:
        """Each chunk's cosine to `vector`: the nearer of its own vector and its expansion's."""
        import numpy as np

        last = self._sims  # the same query again (retrieval asks twice): no second product
        if last is not None and last[0] == query and last[1] is matrix:
            return last[2]
        sims = _product(matrix, vector)
        if len(exp_at):
            sims[exp_at] = np.maximum(sims[exp_at], _product(exp_matrix, vector))
        self._sims = (query, matrix, sims)
        return sims


SPLIT_ROWS = 50_000
"""Vectors above which a query's product runs in two halves at once (see `_product`)."""

_OTHER_HALF = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kb-product")


def _product(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """`matrix @ vector`, a large matrix in two halves on two threads (numpy releases the GIL).

    Each half runs on one BLAS thread: OpenBLAS's own threads spin and stall on a busy machine.
    100K chunks and their 100K expansions: 14 ms on two threads, 27 ms on one (measured idle).
    """
    import numpy as np

    from collective.kb.embeddings import one_blas_thread

    with one_blas_thread():
        if len(matrix) < SPLIT_ROWS:
            return matrix @ vector
        half = len(matrix) // 2
        other = _OTHER_HALF.submit(np.dot, matrix[half:], vector)
        return np.concatenate([matrix[:half] @ vector, other.result()])


def embedding_text(heading: str, text: str) -> str:
    """What is embedded for a chunk: its heading path, then its text."""
    return f"{heading}\n{text}" if heading else text


@functools.lru_cache(maxsize=256)
def _cached_query(embedder: Any, query: str) -> bytes:  # Any: the embedder is the cache key
    return embedder.embed([query])[0].tobytes()


def _query_vector(embedder: Any, query: str) -> np.ndarray:
    import numpy as np

    return np.frombuffer(_cached_query(embedder, query), dtype=np.float32)
