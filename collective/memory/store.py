"""The L2 long-term memory store: LangGraph's `BaseStore`, a SQLite file by default.

`langgraph-checkpoint-sqlite` ships `langgraph.store.sqlite.SqliteStore`; larger deployments
pass any other LangGraph store (e.g. `langgraph.store.postgres.PostgresStore`) to
`TieredMemory` or to the graph builder instead.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langgraph.store.sqlite import SqliteStore

__all__ = ["DEFAULT_MEMORY_DB", "open_default_store", "open_sqlite_store"]

DEFAULT_MEMORY_DB = ".collective/memory.sqlite"
"""Where L2 lives unless `COLLECTIVE_MEMORY_DB` says otherwise."""


def open_sqlite_store(path: str | os.PathLike[str]) -> SqliteStore:
    """Open (creating if needed) a SQLite-backed LangGraph store at `path`.

    The connection is in autocommit mode and may be used from any thread, as
    `SqliteStore.from_conn_string` sets it up; unlike that context manager, the store stays
    open for the life of the process (close it with `store.conn.close()`).
    """
    from langgraph.store.sqlite import SqliteStore

    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    return store


def open_default_store() -> SqliteStore:
    """The store at `$COLLECTIVE_MEMORY_DB`, else `.collective/memory.sqlite`."""
    return open_sqlite_store(os.environ.get("COLLECTIVE_MEMORY_DB") or DEFAULT_MEMORY_DB)
