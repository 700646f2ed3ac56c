"""The SQLite KB's names and figures tables: what the KB learned of its documents at ingest.

`names` holds, per document (its source), the names that cannot be read from the titles: those
the file's front matter gives (`names: Teflon, PTFE resin`), those the local model wrote in the
ingest pass (`origin` `model`, and one row `asked` so a document is asked once), and those a
user added or removed (`collective kb names`). The title and its short forms are read from the
titles whenever the vocabulary is read (`collective.kb.names.title_names`), since whether a
short form names one document depends on every other title.

`figures` holds each chunk's figures as its words state them (`collective.kb.names.
read_figures`), read once when the chunk is added and deleted with it; grouped by property and
converted to one unit when read.

A KB made before these tables gets them when opened, and its chunks' figures are read then,
once (`upgrade`, which says so).
"""

from __future__ import annotations

import builtins
import re
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING

from collective.kb.chunking import heading_root
from collective.kb.names import KbVocabulary, build_vocabulary, read_figures, title_names
from collective.kb.vocabulary import Figure, Thing
from collective.kb.words import content_words

__all__ = [
    "NAME_ORIGINS",
    "SCHEMA",
    "Names",
    "clean_names",
    "document_words",
    "front_matter_names",
    "load_vocabulary",
    "set_names",
    "store_figures",
    "stored_names",
    "titles",
    "upgrade",
]

SCHEMA = """
CREATE TABLE IF NOT EXISTS names (
    source TEXT NOT NULL,
    name TEXT NOT NULL,
    origin TEXT NOT NULL,
    PRIMARY KEY (source, name, origin)
);
CREATE TABLE IF NOT EXISTS figures (
    rowid INTEGER NOT NULL,
    property TEXT NOT NULL,
    low REAL NOT NULL,
    high REAL NOT NULL,
    unit TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS figures_rowid ON figures(rowid);
CREATE TRIGGER IF NOT EXISTS chunks_ad_figures AFTER DELETE ON chunks BEGIN
    DELETE FROM figures WHERE rowid = old.rowid;
END;
"""

VERSION = "1"
"""`meta.vocabulary`: the figures of every chunk have been read (set by `upgrade`)."""

NAME_ORIGINS = ("front", "model", "user", "removed")
"""Where a stored name came from (`asked` marks a document the model was asked about)."""

MAX_NAMES = 12
"""Names kept per document from one origin (a front matter or a model's list)."""
MAX_NAME_CHARS = 60

_NAME_CHARS = re.compile(r"[^\w\s.+/()'’&-]", re.UNICODE)
_FRONT_NAMES = re.compile(r"^\s*(?:names|aliases|also known as)\s*:\s*(.*)$", re.IGNORECASE)


def clean_names(raw: str | Iterable[str]) -> list[str]:
    """Names as a list: split on commas, semicolons and lines, plain characters, short, each once.

    What a model or a file writes is untrusted: letters, digits, spaces and `.+/()'&-` only, so
    no tag, token or markup can become a name.
    """
    parts = re.split(r"[,;\n]", raw) if isinstance(raw, str) else list(raw)
    out: dict[str, str] = {}
    for part in parts:
        name = " ".join(_NAME_CHARS.sub(" ", part).split()).strip(" .-'’")
        name = re.sub(r"^(?:\d+[.)]\s*|and\s+|or\s+)", "", name, flags=re.IGNORECASE)
        if 2 <= len(name) <= MAX_NAME_CHARS and name.lower() not in ("none", "n/a", "no"):
            out.setdefault(name.lower(), name)
    return list(out.values())[:MAX_NAMES]


def front_matter_names(text: str) -> list[str]:
    """The names a file's front matter gives its document (`names: Teflon, PTFE resin`)."""
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        return []
    for line in lines[1:]:
        if line.strip() == "---":
            break
        if match := _FRONT_NAMES.match(line):
            return clean_names(match.group(1).strip().strip("[]"))
    return []


def titles(db: sqlite3.Connection, source: str | None = None) -> dict[str, str]:
    """Each source's title (or one source's): its first chunk's heading root, else its name."""
    where, args = ("WHERE source = ? ", (source,)) if source is not None else ("", ())
    out: dict[str, str] = {}
    for label, heading in db.execute(
        f"SELECT source, heading FROM chunks {where}ORDER BY source, position, rowid", args
    ):
        if not out.get(label):
            out[label] = heading_root(heading) if heading else ""
    return {s: t or PurePath(s).stem.replace("_", " ") or s for s, t in out.items()}


def set_names(db: sqlite3.Connection, source: str, names: Iterable[str], origin: str) -> None:
    """Replace a document's names of one origin (the caller commits)."""
    db.execute("DELETE FROM names WHERE source = ? AND origin = ?", (source, origin))
    db.executemany(
        "INSERT OR IGNORE INTO names(source, name, origin) VALUES (?, ?, ?)",
        [(source, n, origin) for n in names],
    )


def store_figures(db: sqlite3.Connection, rowids: Sequence[int], title_of: dict[str, str]) -> int:
    """Read and store the figures of the chunks `rowids` (their document's names masked).

    Args:
        db: The KB (the caller commits).
        rowids: The chunks.
        title_of: Their sources' titles.

    Returns:
        The figures stored.
    """
    stored = 0
    named: dict[str, KbVocabulary] = {}
    for start in range(0, len(rowids), 500):
        batch = list(rowids[start : start + 500])
        marks = ",".join("?" * len(batch))
        rows = db.execute(
            f"SELECT rowid, id, source, heading, text FROM chunks WHERE rowid IN ({marks})", batch
        ).fetchall()
        for rowid, cid, source, heading, text in rows:
            if source not in named:
                title = title_of.get(source) or heading_root(heading) or source
                own = title_names({source: title})[source]
                named[source] = KbVocabulary([Thing(source, title, own)], {}, {})
            found = read_figures(
                text, thing=source, chunk_id=cid, heading=heading, names=named[source]
            )
            db.executemany(
                "INSERT INTO figures(rowid, property, low, high, unit, text) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(rowid, f.property, f.low, f.high, f.unit, f.text) for f in found],
            )
            stored += len(found)
    return stored


def upgrade(db: sqlite3.Connection) -> str:
    """Read the figures of a KB made before the figures table, once; the note saying so.

    Returns:
        What was done ("" when the KB was up to date or is new).
    """
    done = db.execute("SELECT value FROM meta WHERE key = 'vocabulary'").fetchone()
    if done is not None and done[0] == VERSION:
        return ""
    with db:
        rowids = [r[0] for r in db.execute("SELECT rowid FROM chunks ORDER BY rowid")]
        db.execute("DELETE FROM figures")
        count = store_figures(db, rowids, titles(db)) if rowids else 0
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('vocabulary', ?)", (VERSION,))
    if not rowids:
        return ""
    return (
        f"upgraded the knowledge base: read {count} figures from its {len(rowids)} chunks "
        "(once; its names are read from its titles, `collective kb names` adds more)"
    )


def stored_names(db: sqlite3.Connection) -> dict[str, dict[str, list[str]]]:
    """The stored names by origin, then by source."""
    out: dict[str, dict[str, list[str]]] = {o: defaultdict(list) for o in NAME_ORIGINS}
    for source, name, origin in db.execute(
        "SELECT source, name, origin FROM names ORDER BY source, rowid"
    ):
        if origin in out:
            out[origin][source].append(name)
    return out


def load_vocabulary(
    db: sqlite3.Connection,
    source_of: Callable[[str], str | None],
    words_of: Callable[[str], frozenset[str]],
) -> KbVocabulary:
    """The KB's vocabulary: its titles, stored names and figures (see `build_vocabulary`).

    Args:
        db: The KB.
        source_of: A chunk's source by its id (None: no such chunk), asked when needed.
        words_of: A document's content-word stems (`document_words`), asked when needed.
    """
    title_of = titles(db)
    figures = [
        Figure(source, cid, prop, low, high, unit, text)
        for source, cid, prop, low, high, unit, text in db.execute(
            "SELECT c.source, c.id, f.property, f.low, f.high, f.unit, f.text "
            "FROM figures f JOIN chunks c ON c.rowid = f.rowid ORDER BY c.source, c.position"
        )
    ]
    tags = {t for (raw,) in db.execute("SELECT DISTINCT tags FROM chunks") for t in raw.split(",")}
    names = stored_names(db)
    learned = {
        s: [*names["front"].get(s, []), *names["model"].get(s, [])]
        for s in set(names["front"]) | set(names["model"])
    }
    return build_vocabulary(
        title_of,
        source_of,
        words_of,
        figures,
        tags=tags - {""},
        learned=learned,
        added=names["user"],
        removed=names["removed"],
    )


def document_words(db: sqlite3.Connection, source: str) -> frozenset[str]:
    """A document's content-word stems (headings, text and tags of its chunks)."""
    words: set[str] = set()
    for heading, text, tags in db.execute(
        "SELECT heading, text, tags FROM chunks WHERE source = ?", (source,)
    ):
        words |= set(content_words(f"{heading} {text} {tags.replace(',', ' ')}"))
    return frozenset(words)


class Names:
    """The names and figures methods of `SqliteKnowledgeStore` (a part of it, not a store)."""

    _db: sqlite3.Connection
    _lock: threading.RLock
    _vocab: tuple[int, KbVocabulary] | None
    _words: dict[str, frozenset[str]]

    if TYPE_CHECKING:

        def _changed(self) -> None: ...

    def vocabulary(self) -> KbVocabulary:
        """The KB's names and figures as they stand now (`VocabularySource`; cached)."""
        with self._lock:
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
            if self._vocab is not None and self._vocab[0] == version:
                return self._vocab[1]
            self._words.clear()
            vocab = load_vocabulary(self._db, self._source_of, self._words_of)
            self._vocab = (version, vocab)
            return vocab

    def _source_of(self, chunk_id: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT source FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
        return row[0] if row else None

    def _words_of(self, source: str) -> frozenset[str]:
        with self._lock:
            if source not in self._words:
                self._words[source] = document_words(self._db, source)
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
        added = clean_names(names)
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
        removed = clean_names(names)
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
            return titles(self._db)

    def set_model_names(self, source: str, names: str | Iterable[str], model: str) -> bool:
        """Store the names a model wrote for a document (asked once); False when it is gone.

        `names` as written (comma-separated) or listed; cleaned (`clean_names`) and kept in
        the vocabulary only where they name no other document better.
        """
        with self._lock, self._db:
            if not self._db.execute("SELECT 1 FROM chunks WHERE source = ?", (source,)).fetchone():
                return False
            self._changed()
            set_names(self._db, source, clean_names(names), "model")
            set_names(self._db, source, [model], "asked")
            return True
