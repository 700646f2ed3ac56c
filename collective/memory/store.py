"""Where threads (checkpoints) and L2 long-term memory (the store) live: SQLite or PostgreSQL.

A location is a file path (SQLite, the default: `.collective/checkpoints.sqlite` and
`.collective/memory.sqlite`) or a `postgresql://` URL (LangGraph's Postgres checkpointer and
store from `langgraph-checkpoint-postgres`: `pip install 'collective[postgres]'`). Many
processes may share one database; its tables are created once, under an advisory lock.
Anything else (`mysql://...`, `sqlite://...`) is refused with a `ConfigError`.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collective.databases import (
    CHECKPOINTS,
    STORE,
    DatabaseKind,
    check_database,
    create_new,
    mark_new,
)
from collective.errors import ConfigError

if TYPE_CHECKING:
    from langgraph.store.sqlite import SqliteStore

__all__ = [
    "check_location",
    "is_postgres",
    "open_checkpointer",
    "open_sqlite_store",
    "open_store",
    "process_store",
    "prune_threads",
    "redact",
]

_POSTGRES = ("postgresql://", "postgres://")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SETUP_LOCK = 0x636F6C6C  # pg_advisory_lock key: one process creates the tables at a time


def is_postgres(location: str | os.PathLike[str]) -> bool:
    """Whether `location` is a PostgreSQL URL."""
    return str(location).startswith(_POSTGRES)


def redact(location: str | os.PathLike[str]) -> str:
    """The location with any password hidden, for messages."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", str(location))


def check_location(value: str | os.PathLike[str], key: str) -> str:
    """A file path or a `postgresql://` URL, as a string.

    Raises:
        ValueError: Any other URL (or an empty value), with what to use instead.
    """
    text = str(value).strip()
    if not text:
        raise ValueError(f"{key} is empty; give a file path or a postgresql:// URL")
    if _URL.match(text) and not is_postgres(text):
        raise ValueError(
            f"{redact(text)} is neither a file path nor a postgresql:// URL; use a path "
            f"(SQLite) or postgresql://USER:PASSWORD@HOST:PORT/DB for `{key}`"
        )
    return text


@functools.cache
def process_store() -> Any:
    """The in-memory store L2 uses when none is given: one per process, never a file."""
    from langgraph.store.memory import InMemoryStore

    return InMemoryStore()


def open_sqlite_store(path: str | os.PathLike[str]) -> SqliteStore:
    """Open (creating if needed) a SQLite-backed LangGraph store at `path`.

    The connection is in autocommit mode and may be used from any thread, as
    `SqliteStore.from_conn_string` sets it up; unlike that context manager, the store stays
    open for the life of the process (close it with `store.conn.close()`).
    """
    from langgraph.store.sqlite import SqliteStore

    new = str(path) == ":memory:" or _prepare(path, STORE)
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    if new:
        mark_new(conn, STORE)
    store = SqliteStore(conn)
    store.setup()
    return store


def _postgres_modules(key: str) -> Any:
    try:
        import langgraph.checkpoint.postgres.aio as saver
        import langgraph.store.postgres.aio as store
    except ImportError:
        raise ConfigError(
            f"`{key}` is a postgresql:// URL but PostgreSQL support is not installed: "
            "pip install 'collective[postgres]'"
        ) from None
    return saver, store


async def _setup_once(location: str, setup: Any) -> None:
    """Run a Postgres saver's or store's `setup()` while holding the advisory lock.

    The lock is polled, not awaited in one statement: a waiting statement holds a snapshot,
    which the store's `CREATE INDEX CONCURRENTLY` in the holder's setup would wait for.
    """
    import asyncio

    import psycopg

    async with await psycopg.AsyncConnection.connect(location, autocommit=True) as conn:
        while True:
            cursor = await conn.execute("SELECT pg_try_advisory_lock(%s)", (_SETUP_LOCK,))
            row = await cursor.fetchone()
            if row and row[0]:
                break
            await asyncio.sleep(0.1)
        try:
            await setup()
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))


async def _open_postgres(location: str, key: str, kind: str, stack: AsyncExitStack) -> Any:
    saver_module, store_module = _postgres_modules(key)
    import psycopg

    cls = saver_module.AsyncPostgresSaver if kind == "saver" else store_module.AsyncPostgresStore
    try:
        opened = await stack.enter_async_context(cls.from_conn_string(location))
        await _setup_once(location, opened.setup)
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ConfigError(
            f"cannot use PostgreSQL at {redact(location)} for `{key}` ({reason}); check that "
            "the server runs and the URL, user and database are right"
        ) from None
    return opened


async def open_checkpointer(location: str | os.PathLike[str], stack: AsyncExitStack) -> Any:
    """An async LangGraph checkpointer at `location` (a path or URL); `stack` closes it."""
    text = check_location(location, "checkpoints")
    if is_postgres(text):
        return await _open_postgres(text, "checkpoints", "saver", stack)
    import asyncio

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    await asyncio.to_thread(_probe_sqlite, text)
    saver = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(text))
    await saver.setup()
    return saver


def _prepare(path: str | os.PathLike[str], kind: DatabaseKind) -> bool:
    """Refuse a file of another kind (untouched); create a new one's file. True: it is new."""
    new = check_database(path, kind)
    if new:
        create_new(path, kind)
    return new


def _probe_sqlite(path: str) -> None:
    """Check the checkpoint file's kind, then open and read it once (`sqlite3.Error`: unusable).

    aiosqlite opens a file in its own thread: when that fails (a directory, no permission, not
    a database), its thread outlives the failed run's event loop and prints a traceback after
    the error line. Failing here first keeps the error the only thing the user sees.
    """
    new = _prepare(path, CHECKPOINTS)
    conn = sqlite3.connect(path)
    try:
        if new:
            mark_new(conn, CHECKPOINTS)
        conn.execute("PRAGMA schema_version").fetchone()
    finally:
        conn.close()


async def open_store(location: str | os.PathLike[str], stack: AsyncExitStack) -> Any:
    """The L2 store at `location` (a path or URL); `stack` closes it.

    Both kinds may be used from worker threads as well as from the event loop (the memory
    tiers archive from a thread).
    """
    import asyncio

    text = check_location(location, "store")
    if is_postgres(text):
        return await _open_postgres(text, "store", "store", stack)
    store = await asyncio.to_thread(open_sqlite_store, text)
    stack.callback(store.conn.close)
    return store


def _checkpoint_time(checkpoint_id: str) -> float:
    """The Unix time in a LangGraph checkpoint id (a time-ordered UUIDv6)."""
    from langgraph.checkpoint.base.id import UUID

    return (UUID(checkpoint_id).time - 0x01B21DD213814000) / 1e7


async def _latest_checkpoints(location: str, saver: Any) -> list[tuple[str, str]]:
    """`(thread_id, newest checkpoint id)` for every thread."""
    sql = "SELECT thread_id, max(checkpoint_id) FROM checkpoints GROUP BY thread_id"
    if is_postgres(location):
        import psycopg

        async with await psycopg.AsyncConnection.connect(location) as conn:
            cursor = await conn.execute(sql)
            return [(str(t), str(c)) for t, c in await cursor.fetchall()]
    async with saver.conn.execute(sql) as cursor:
        return [(str(t), str(c)) for t, c in await cursor.fetchall()]


async def prune_threads(
    location: str | os.PathLike[str], older_than_s: float, *, dry_run: bool = False
) -> list[str]:
    """Delete every thread whose newest checkpoint is older than `older_than_s` seconds.

    Works on SQLite and PostgreSQL checkpoints alike; the L2 long-term memory is kept (it is
    meant to outlive threads). Returns the pruned thread ids, oldest first.
    """
    cutoff = time.time() - older_than_s
    if not is_postgres(location) and not Path(location).exists():
        return []  # no file, no threads (and no new empty database)
    async with AsyncExitStack() as stack:
        saver = await open_checkpointer(location, stack)
        latest = await _latest_checkpoints(str(location), saver)
        old = sorted((_checkpoint_time(c), t) for t, c in latest if _checkpoint_time(c) < cutoff)
        if not dry_run:
            for _, thread in old:
                await saver.adelete_thread(thread)
    return [thread for _, thread in old]
