"""The embedded default knowledge store: one SQLite file with FTS5 (BM25) full-text search.

Needs no server. Files are chunked by `collective.kb.chunking`; each chunk gets a stable id from
its source, heading path and text, so re-adding an unchanged file changes nothing (the file's
SHA-256 is recorded and compared first) and re-adding an edited file replaces only the chunks
that changed.

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

import bisect
import builtins
import functools
import hashlib
import itertools
import math
import re
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collective.databases import KB, check_database, create_new
from collective.errors import ConfigError
from collective.kb import sqlite_vocabulary
from collective.kb.chunking import heading_root, split_text
from collective.kb.store import Chunk, DenseResult, chunk_id, rank_chunks
from collective.local_files import read_regular_file

if TYPE_CHECKING:
    import numpy as np

    from collective.kb.embeddings import Embedder
    from collective.kb.names import KbVocabulary

__all__ = ["IngestStats", "SqliteKnowledgeStore", "check_kb_file", "query_terms"]

COMMON_SHARE = 0.5
"""A query word found in more than this share of the chunks is not matched on (see `search`)..."""
COMMON_CHUNKS = 5000
"""... nor one found in more than this many: FTS5 ranks every chunk holding a matched word, and
at 100K chunks such words cost 17 of 24 ms CPU a search (measured); their weight in BM25 is
small, they still count towards coverage, and the dense side finds chunks without the rare
words."""

EXPANSION_BM25 = 0.5
"""Weight of an expansion's BM25 (the chunk's own text weighs 1)."""

EMBED_BATCH = 64
"""Chunks embedded and committed at a time (an interrupted `kb add` keeps finished batches)."""

Progress = Callable[[int, int], None]
"""`(done, total)` chunks embedded so far, called after each batch."""

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
"""Suffixes picked up when a directory is added (explicit files are read whatever their suffix)."""

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves i'm i've it's don't doesn't isn't can't won't""".split()
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sources (
    source TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL,
    heading TEXT NOT NULL,
    text TEXT NOT NULL,
    tags TEXT NOT NULL,
    position INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_source ON chunks(source);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    heading, text, tags, content='chunks', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, heading, text, tags)
    VALUES (new.rowid, new.heading, new.text, new.tags);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, heading, text, tags)
    VALUES ('delete', old.rowid, old.heading, old.text, old.tags);
END;
CREATE TABLE IF NOT EXISTS vectors (rowid INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TRIGGER IF NOT EXISTS chunks_ad_vectors AFTER DELETE ON chunks BEGIN
    DELETE FROM vectors WHERE rowid = old.rowid;
END;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS expansions (
    rowid INTEGER PRIMARY KEY,
    text TEXT NOT NULL,
    model TEXT NOT NULL,
    seconds REAL NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS expansions_fts USING fts5(
    text, content='expansions', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TABLE IF NOT EXISTS expansion_vectors (rowid INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE TRIGGER IF NOT EXISTS expansions_ai AFTER INSERT ON expansions BEGIN
    INSERT INTO expansions_fts(rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER IF NOT EXISTS expansions_ad AFTER DELETE ON expansions BEGIN
    INSERT INTO expansions_fts(expansions_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
    DELETE FROM expansion_vectors WHERE rowid = old.rowid;
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad_expansions AFTER DELETE ON chunks BEGIN
    DELETE FROM expansions WHERE rowid = old.rowid;
END;
"""

_UNSET: Any = object()


# -- recognising a KB ------------------------------------------------------------------------------

APPLICATION_ID = KB.application_id
"""`PRAGMA application_id` of a collective KB ("colk"), set when the KB is created."""


def check_kb_file(path: str | Path) -> bool:
    """Whether the file at `path` is new (missing or empty) rather than a KB; refuse others.

    Looks with `stat` and a read-only connection (`collective.databases.check_database`), so a
    database that is not a KB (the memory or checkpoint database, any other) is never written
    to, not even its header, and a directory, FIFO or device is refused without opening it.

    Raises:
        ConfigError: Not a regular file, not a SQLite database, or a database that is not a KB.
    """
    return check_database(path, KB)


# -- reading a file ------------------------------------------------------------------------------

MAX_FILE_BYTES = 64 << 20
"""The largest file `add_file` reads (64 MiB: a 20 MB one-paragraph file adds in 1.5 s here)."""


# ---------------------------------------------------------------------------------------------


def _adds_nothing(file: Path, text: str) -> str:
    """Why a file that makes no chunk is refused: say what it holds instead of text."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    headings = sum(1 for line in lines if line.startswith("#"))
    if not lines:
        return f"{file} holds no text: nothing to add"
    if headings:
        return (
            f"{file} holds only headings ({headings:,} lines starting with #) and no text under "
            "them: nothing to add; write each note as a line without a leading # under its "
            "heading"
        )
    return f"{file} holds no text outside its tags lines and front matter: nothing to add"


def query_terms(query: str, limit: int = 32) -> list[str]:
    """The content words of a query: lower-cased, stopwords dropped, deduplicated, in order."""
    words = (w.lower().replace("’", "'") for w in _WORD.findall(query))
    terms = [w for w in words if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]
    return list(dict.fromkeys(terms))[:limit]


@dataclass
class IngestStats:
    """What an `add_file`/`add_paths` call changed."""

    files: int = 0
    """Files read."""
    unchanged_files: int = 0
    """Files whose content matched what the store already had (nothing written)."""
    added: int = 0
    """Chunks inserted."""
    removed: int = 0
    """Chunks deleted because their file no longer has them."""
    kept: int = 0
    """Chunks of changed files that were already present unchanged."""
    sources: list[str] = field(default_factory=list)
    """The source labels of the files read."""

    def merge(self, other: IngestStats) -> None:
        """Add `other`'s counts to this one."""
        self.files += other.files
        self.unchanged_files += other.unchanged_files
        self.added += other.added
        self.removed += other.removed
        self.kept += other.kept
        self.sources += other.sources

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "files": self.files,
            "unchanged_files": self.unchanged_files,
            "added": self.added,
            "removed": self.removed,
            "kept": self.kept,
            "sources": list(self.sources),
        }


def _row_to_chunk(row: sqlite3.Row | tuple, score: float = 0.0) -> Chunk:
    cid, source, heading, text, tags = row[:5]
    return Chunk(
        id=cid,
        text=text,
        source=source,
        tags=tuple(t for t in tags.split(",") if t),
        score=score,
        heading=heading,
    )


class SqliteKnowledgeStore:
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
            self._db.executescript(_SCHEMA + sqlite_vocabulary.SCHEMA)
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

    # -- ingestion -----------------------------------------------------------------------------

    def add_file(
        self, path: str | Path, *, source: str | None = None, embed: bool = True
    ) -> IngestStats:
        """Ingest one Markdown or text file (idempotent).

        Args:
            path: The file to read (UTF-8).
            source: The label stored as the chunks' source; defaults to the absolute path.
            embed: Compute the vectors of chunks that lack one now (else: `embed_missing`).

        Returns:
            What changed.

        Raises:
            ConfigError: The file does not exist, is not a regular file (a FIFO, a socket, a
                device, a dangling link: refused without blocking), is over 64 MiB, is not UTF-8
                text, or holds nothing a chunk can hold (only headings, or nothing at all).
        """
        file = Path(path)
        try:
            raw = read_regular_file(
                file, limit=MAX_FILE_BYTES, fix="add Markdown or text files of at most 64 MiB"
            )
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{file} is not UTF-8 text; add Markdown or text files") from exc
        label = source if source is not None else str(file.resolve())
        sha = hashlib.sha256(raw).hexdigest()
        stats = IngestStats(files=1, sources=[label])
        pieces = split_text(text)
        if not pieces:
            raise ConfigError(_adds_nothing(file, text))
        new: dict[str, tuple[str, str, str, str, int]] = {}
        for position, piece in enumerate(pieces):
            cid = chunk_id(piece.text, label, piece.heading)
            new.setdefault(cid, (cid, piece.heading, piece.text, ",".join(piece.tags), position))
        with self._lock, self._db:
            self._changed()
            row = self._db.execute(
                "SELECT sha256 FROM sources WHERE source = ?", (label,)
            ).fetchone()
            if row is not None and row[0] == sha:
                stats.unchanged_files = 1
                return stats
            old = {
                r[0] for r in self._db.execute("SELECT id FROM chunks WHERE source = ?", (label,))
            }
            gone = old - new.keys()
            self._db.executemany("DELETE FROM chunks WHERE id = ?", [(g,) for g in sorted(gone)])
            fresh = [new[c] for c in new if c not in old]
            title_before = sqlite_vocabulary.titles(self._db, label).get(label)
            self._db.executemany(
                "INSERT INTO chunks(id, source, heading, text, tags, position) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(cid, label, h, t, tg, pos) for cid, h, t, tg, pos in fresh],
            )
            title = heading_root(next((p.heading for p in pieces if p.heading), ""))
            title = title or Path(label).stem.replace("_", " ") or label
            if title_before is not None and title_before != title:  # another document now
                self._db.execute(
                    "DELETE FROM names WHERE source = ? AND origin IN ('model', 'asked')", (label,)
                )
            sqlite_vocabulary.set_names(
                self._db, label, sqlite_vocabulary.front_matter_names(text), "front"
            )
            marks = ",".join("?" * len(fresh))
            rowids = [
                r[0]
                for r in self._db.execute(
                    f"SELECT rowid FROM chunks WHERE id IN ({marks})", [f[0] for f in fresh]
                )
            ]
            sqlite_vocabulary.store_figures(self._db, rowids, {label: title})
            # Positions of kept chunks may have moved.
            self._db.executemany(
                "UPDATE chunks SET position = ? WHERE id = ?",
                [(new[c][4], c) for c in new if c in old],
            )
            self._db.execute(
                "INSERT OR REPLACE INTO sources(source, sha256, chunks, added_at) "
                "VALUES (?, ?, ?, ?)",
                (label, sha, len(new), time.time()),
            )
            stats.added, stats.removed, stats.kept = len(fresh), len(gone), len(new) - len(fresh)
        if embed:
            self.embed_missing()
        return stats

    def add_paths(
        self, paths: Iterable[str | Path], *, base: str | Path | None = None, embed: bool = True
    ) -> IngestStats:
        """Ingest files and directories (directories: their .md/.markdown/.txt files, recursively).

        Args:
            paths: Files or directories.
            base: When given, sources are stored relative to it (POSIX form) rather than as
                absolute paths, so a KB built from the same tree elsewhere has the same ids.
            embed: Compute the missing vectors now (else: `embed_missing`).

        Returns:
            What changed, summed over all files.

        Raises:
            ConfigError: A path does not exist or a file is not UTF-8 text.
        """
        stats = IngestStats()
        for file in self._expand(paths):
            label = None
            if base is not None:
                label = file.resolve().relative_to(Path(base).resolve()).as_posix()
            stats.merge(self.add_file(file, source=label, embed=False))
        if embed:
            self.embed_missing()
        return stats

    @staticmethod
    def _expand(paths: Iterable[str | Path]) -> list[Path]:
        files: list[Path] = []
        for raw in paths:
            path = Path(raw)
            if path.is_dir():
                files += sorted(
                    p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES
                )
            elif path.is_file():
                files.append(path)
            else:
                raise ConfigError(f"no such file or directory: {path}; check the path")
        return files

    # -- vectors -------------------------------------------------------------------------------

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

    # -- expansions ----------------------------------------------------------------------------

    def expansion_status(self) -> tuple[int, int]:
        """`(chunks with an expansion, chunks)`."""
        with self._lock:
            expanded = int(self._db.execute("SELECT count(*) FROM expansions").fetchone()[0])
            chunks = int(self._db.execute("SELECT count(*) FROM chunks").fetchone()[0])
        return expanded, chunks

    def has_expansions(self) -> bool:
        """Whether any chunk has an expansion (cached until the KB changes)."""
        with self._lock:
            return self._document_frequency([])[2]

    def expansion_seconds(self) -> builtins.list[float]:
        """The generation time of each expansion a model wrote here (cached ones: none)."""
        with self._lock:
            return [
                r[0] for r in self._db.execute("SELECT seconds FROM expansions WHERE seconds > 0")
            ]

    def expansion(self, chunk_id: str) -> str | None:
        """The expansion text of a chunk (None: it has none); for inspection, never for prompts."""
        with self._lock:
            row = self._db.execute(
                "SELECT e.text FROM expansions e JOIN chunks c ON c.rowid = e.rowid WHERE c.id = ?",
                (chunk_id,),
            ).fetchone()
        return row[0] if row else None

    def unexpanded(self) -> builtins.list[tuple[int, str, str, str]]:
        """`(rowid, source, heading, text)` of each chunk without an expansion, in KB order."""
        with self._lock:
            return self._db.execute(
                "SELECT c.rowid, c.source, c.heading, c.text FROM chunks c "
                "LEFT JOIN expansions e ON e.rowid = c.rowid WHERE e.rowid IS NULL "
                "ORDER BY c.source, c.position, c.rowid"
            ).fetchall()

    def set_expansion(self, rowid: int, text: str, model: str, seconds: float = 0.0) -> bool:
        """Store (committed at once) a chunk's expansion; False when the chunk is gone."""
        with self._lock, self._db:
            self._changed()
            self._db.execute("DELETE FROM expansions WHERE rowid = ?", (rowid,))
            cur = self._db.execute(
                "INSERT INTO expansions(rowid, text, model, seconds) SELECT ?, ?, ?, ? "
                "WHERE EXISTS (SELECT 1 FROM chunks WHERE rowid = ?)",
                (rowid, text, model, seconds, rowid),
            )
            return cur.rowcount > 0

    def clear_expansions(self) -> int:
        """Delete every expansion (and its vector); returns how many."""
        with self._lock, self._db:
            self._changed()
            return self._db.execute("DELETE FROM expansions").rowcount

    # -- names and figures ---------------------------------------------------------------------

    def vocabulary(self) -> KbVocabulary:
        """The KB's names and figures as they stand now (`VocabularySource`; cached)."""
        with self._lock:
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
            if self._vocab is not None and self._vocab[0] == version:
                return self._vocab[1]
            self._words.clear()
            vocab = sqlite_vocabulary.load_vocabulary(self._db, self._source_of, self._words_of)
            self._vocab = (version, vocab)
            return vocab

    def _source_of(self, chunk_id: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT source FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
        return row[0] if row else None

    def _words_of(self, source: str) -> frozenset[str]:
        with self._lock:
            if source not in self._words:
                self._words[source] = sqlite_vocabulary.document_words(self._db, source)
            return self._words[source]

    def thing(self, ref: str) -> str | None:
        """The source of the document `ref` names: its source label, its title or a name."""
        things = self.vocabulary().things()
        for match in (
            lambda t: t.key == ref,
            lambda t: t.title.lower() == ref.lower(),
            lambda t: ref.lower() in (n.lower() for n in t.names),
        ):
            found = [t.key for t in things if match(t)]
            if len(found) == 1:
                return found[0]
        return None

    def add_names(self, source: str, names: Iterable[str]) -> builtins.list[str]:
        """Add names a user gives a document (kept whatever else names); the names added."""
        added = sqlite_vocabulary.clean_names(names)
        with self._lock, self._db:
            self._changed()
            for name in added:
                self._db.execute(
                    "DELETE FROM names WHERE source = ? AND lower(name) = lower(?) "
                    "AND origin = 'removed'",
                    (source, name),
                )
                self._db.execute(
                    "INSERT OR IGNORE INTO names(source, name, origin) VALUES (?, ?, 'user')",
                    (source, name),
                )
        return added

    def remove_names(self, source: str, names: Iterable[str]) -> builtins.list[str]:
        """Take names from a document, whoever gave them (a title stays); the names removed."""
        removed = sqlite_vocabulary.clean_names(names)
        with self._lock, self._db:
            self._changed()
            for name in removed:
                self._db.execute(
                    "DELETE FROM names WHERE source = ? AND lower(name) = lower(?) "
                    "AND origin = 'user'",
                    (source, name),
                )
                self._db.execute(
                    "INSERT OR IGNORE INTO names(source, name, origin) VALUES (?, ?, 'removed')",
                    (source, name),
                )
        return removed

    def unnamed(self) -> builtins.list[tuple[str, str, str]]:
        """`(source, title, opening text)` of each document the model has not been asked about."""
        title_of = self.vocabulary_titles()
        with self._lock:
            asked = {
                r[0] for r in self._db.execute("SELECT source FROM names WHERE origin = 'asked'")
            }
            out = []
            for source in sorted(set(title_of) - asked):
                rows = self._db.execute(
                    "SELECT text FROM chunks WHERE source = ? ORDER BY position, rowid LIMIT 2",
                    (source,),
                ).fetchall()
                out.append((source, title_of[source], " ".join(r[0] for r in rows)))
        return out

    def vocabulary_titles(self) -> dict[str, str]:
        """Each document's title, by source."""
        with self._lock:
            return sqlite_vocabulary.titles(self._db)

    def set_model_names(self, source: str, names: str | Iterable[str], model: str) -> bool:
        """Store the names a model wrote for a document (asked once); False when it is gone.

        `names` as written (comma-separated) or listed; cleaned (`clean_names`) and kept in
        the vocabulary only where they name no other document better.
        """
        with self._lock, self._db:
            if not self._db.execute("SELECT 1 FROM chunks WHERE source = ?", (source,)).fetchone():
                return False
            self._changed()
            sqlite_vocabulary.set_names(
                self._db, source, sqlite_vocabulary.clean_names(names), "model"
            )
            sqlite_vocabulary.set_names(self._db, source, [model], "asked")
            return True

    def _changed(self) -> None:
        """Forget what was cached of the KB (this connection wrote to it)."""
        self._stats.clear()
        self._matrix = None
        self._vocab = None

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
        hits = rank_chunks([_row_to_chunk(row, round(max(0.0, wanted[row[5]]), 6)) for row in rows])
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
        return [_row_to_chunk(r) for r in rows]

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
        return _row_to_chunk(row) if row else None

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
        present = _presence(texts, terms)
        idf = {t: math.log(1.0 + (total - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        idf_sum = sum(idf.values()) or 1.0
        best = max(-b for b in bm25.values()) or 1.0
        scored = []
        for row in rows:
            rowid = row[5]
            coverage = sum(idf[t] for t in terms if rowid in present[t]) / idf_sum
            score = 0.7 * coverage + 0.3 * (-bm25[rowid] / best)
            scored.append(_row_to_chunk(row, round(score, 6)))
        return rank_chunks(scored)[:k]


_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
"""A token as FTS5's unicode61 tokenizer cuts one: a run of letters and digits."""


def _presence(texts: dict[int, str], terms: Sequence[str]) -> dict[str, set[int]]:
    """For each term, the texts (by rowid) FTS5's `porter unicode61` tokenizer would match it in.

    Stems by Snowball's Porter stemmer, the same as SQLite's for all but 37 of 22,856 English
    words (measured; those differ alike for every form of a word, as `analogy`/`analogies`).
    A word can only have a stem it starts with, less the stem's last letter (true of every
    word measured): each stem is one scan of the texts for that prefix.
    """
    rowids = list(texts)
    folded = [_folded(text) for text in texts.values()]  # folding may change a text's length
    joined = "\n".join(folded)
    starts = list(itertools.accumulate((len(text) + 1 for text in folded), initial=0))
    present = {}
    for term in terms:
        found: set[int] | None = None
        for token in _TOKEN.findall(_folded(term)):
            stem = _porter(token)
            holding = {
                rowids[bisect.bisect_right(starts, m.start()) - 1]
                for m in _starting(stem[: max(1, len(stem) - 1)]).finditer(joined)
                if not (m.start() and joined[m.start() - 1].isalnum()) and _porter(m[0]) == stem
            }
            found = holding if found is None else found & holding
        present[term] = found or set()
    return present


def _folded(text: str) -> str:
    """`text` lower-cased and without diacritics, as FTS5's unicode61 tokenizer reads it."""
    if not text.isascii():
        text = "".join(
            c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)
        )
    return text.lower()


@functools.lru_cache(maxsize=1024)
def _starting(prefix: str) -> re.Pattern[str]:
    """The rest of a token from `prefix` on (the caller checks where the token starts)."""
    return re.compile(rf"{re.escape(prefix)}[^\W_]*", re.UNICODE)


@functools.lru_cache(maxsize=65536)
def _porter(token: str) -> str:
    """`token` stemmed as FTS5's porter tokenizer stems it (tokens under 3 letters as they are)."""
    return str(_porter_stemmer().stemWord(token)) if 3 <= len(token) <= 64 else token


@functools.cache
def _porter_stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("porter")


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
