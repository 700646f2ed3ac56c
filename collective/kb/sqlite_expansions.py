"""The SQLite KB's chunk expansions: stored, listed, cleared (`kb.expansion` writes them).

A chunk may have one expansion, the questions and keywords a chat model wrote for it, stored in
`expansions` under the chunk's rowid with its own FTS5 index and vector. It only helps find the
chunk; deleting a chunk deletes it.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

__all__ = ["Expansions"]


class Expansions:
    """The expansion methods of `SqliteKnowledgeStore` (a part of it, not a store of its own)."""

    _db: sqlite3.Connection
    _lock: threading.RLock

    if TYPE_CHECKING:

        def _changed(self) -> None: ...

        def _document_frequency(self, terms: Sequence[str]) -> tuple[int, dict[str, int], bool]: ...

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
