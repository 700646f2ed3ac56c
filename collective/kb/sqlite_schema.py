"""The SQLite KB's tables, how a file is recognised as a KB, and a chunk read from its row.

`sources` (each file's hash), `chunks` with their FTS5 index (`porter unicode61`), `vectors`,
`meta` (the embedding model), `expansions` with their own FTS5 index and vectors; triggers keep
the indexes and the rows under a chunk in step with it. The names and figures tables are
`collective.kb.sqlite_vocabulary`'s.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from collective.databases import KB, check_database
from collective.kb.store import Chunk

__all__ = ["APPLICATION_ID", "SCHEMA", "check_kb_file", "row_to_chunk"]

SCHEMA = """
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


def row_to_chunk(row: sqlite3.Row | tuple, score: float = 0.0) -> Chunk:
    """The chunk of a `(id, source, heading, text, tags, ...)` row, scored `score`."""
    cid, source, heading, text, tags = row[:5]
    return Chunk(
        id=cid,
        text=text,
        source=source,
        tags=tuple(t for t in tags.split(",") if t),
        score=score,
        heading=heading,
    )
