"""Adding files to the SQLite KB: read, chunked, and only what changed written.

Files are chunked by `collective.kb.chunking`; each chunk gets a stable id from its source,
heading path and text, so re-adding an unchanged file changes nothing (the file's SHA-256 is
recorded and compared first) and re-adding an edited file replaces only the chunks that changed.
A new chunk's figures are read as it is added, and the file's front-matter names stored
(`collective.kb.sqlite_vocabulary`).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from collective.errors import ConfigError
from collective.kb import sqlite_vocabulary
from collective.kb.chunking import heading_root, split_text
from collective.kb.store import chunk_id
from collective.local_files import read_regular_file

if TYPE_CHECKING:
    import sqlite3

    from collective.kb.sqlite_vectors import Progress

__all__ = ["MAX_FILE_BYTES", "TEXT_SUFFIXES", "Ingest", "IngestStats"]

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
"""Suffixes picked up when a directory is added (explicit files are read whatever their suffix)."""

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


class Ingest:
    """The ingest methods of `SqliteKnowledgeStore` (a part of it, not a store of its own)."""

    _db: sqlite3.Connection
    _lock: threading.RLock

    if TYPE_CHECKING:

        def _changed(self) -> None: ...

        def embed_missing(self, progress: Progress | None = None) -> int:
            """`Vectors.embed_missing`."""
            ...

    def add_file(
        self, path: str | Path, *, source: str | None = None, embed: bool = True
    ) -> IngestStats:
        """Ingest one Markdown or text file (idempotent).

        Long: one transaction (chunks, names and figures of the file replaced together), kept in
        one body so that its commit and rollback are plain to read.

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
