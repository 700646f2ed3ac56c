"""Which kind of SQLite database a file holds, checked before collective writes to it.

collective keeps three kinds of SQLite file: the knowledge base (`kb`), the threads'
checkpoints (`checkpoints`) and the L2 memory store (`store`). Each is marked with its own
`PRAGMA application_id` when collective creates it; files made before the marks are recognised
by their tables. `check_database` looks through a read-only connection (never writing, not even
the header) and refuses a file of another kind, a file that is not SQLite, and anything that is
not a regular file (a directory, a FIFO, a device), so a mistyped path never adds tables to the
wrong database or blocks on a pipe.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from collective.errors import ConfigError
from collective.local_files import not_regular

__all__ = [
    "CHECKPOINTS",
    "KB",
    "KINDS",
    "STORE",
    "DatabaseKind",
    "check_database",
    "create_new",
    "mark_new",
]


@dataclass(frozen=True)
class DatabaseKind:
    """One kind of SQLite file collective keeps."""

    name: str
    """What a user calls it, e.g. `knowledge base`."""
    application_id: int
    """`PRAGMA application_id` set when collective creates one."""
    tables: frozenset[str]
    """Tables that identify one made before the mark (all present)."""
    point_elsewhere: str
    """How to use another file, e.g. `--checkpoints PATH (config checkpoints)`."""
    columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Exact columns of some of `tables`, where the table names alone are too common."""

    def holds(self, names: set[str], columns: Mapping[str, tuple[str, ...]]) -> bool:
        """Whether a database of `names` (tables) and `columns` was made as this kind."""
        return self.tables <= names and all(columns.get(t) == c for t, c in self.columns.items())


KB = DatabaseKind(
    "knowledge base",
    0x636F6C6B,  # "colk"
    frozenset({"sources", "chunks", "chunks_fts"}),
    "--kb PATH (a KB file created by `collective kb add`, or a new path)",
    {
        "sources": ("source", "sha256", "chunks", "added_at"),
        "chunks": ("rowid", "id", "source", "heading", "text", "tags", "position"),
    },
)
CHECKPOINTS = DatabaseKind(
    "checkpoint database",
    0x636F6C63,  # "colc"
    frozenset({"checkpoints", "writes"}),
    "--checkpoints PATH or COLLECTIVE_CHECKPOINTS=PATH (config `checkpoints`)",
)
STORE = DatabaseKind(
    "memory store",
    0x636F6C6D,  # "colm"
    frozenset({"store"}),
    "COLLECTIVE_STORE=PATH (config `store`)",
)
KINDS = (KB, CHECKPOINTS, STORE)


def _read_only(file: Path) -> sqlite3.Connection:
    # Immutable unless a journal shows another connection at work: a read-only connection to a
    # WAL database would otherwise leave -wal and -shm files beside it.
    live = any(file.with_name(file.name + end).exists() for end in ("-wal", "-journal"))
    uri = file.as_uri() + ("?mode=ro" if live else "?mode=ro&immutable=1")
    return sqlite3.connect(uri, uri=True)


def check_database(path: str | os.PathLike[str], kind: DatabaseKind) -> bool:
    """Whether `path` is new (missing or empty) rather than a `kind` database; refuse others.

    Nothing is written and nothing blocks: the path is looked at with `stat` before any open.

    Raises:
        ConfigError: Not a regular file, unreadable, not SQLite, or a database of another kind
            (the message names what it is and how to use another file; it was left untouched).
    """
    file = Path(path)
    untouched = (
        f"it was left untouched: use another file for the {kind.name}, {kind.point_elsewhere}"
    )
    try:
        mode = os.stat(file).st_mode
    except FileNotFoundError:
        if file.is_symlink():
            raise ConfigError(
                f"{file} is a symbolic link to {os.readlink(file)}, which does not exist; fix "
                f"or remove the link, or use another file ({kind.point_elsewhere})"
            ) from None
        return True
    except OSError as exc:
        raise ConfigError(f"cannot read {file} ({exc.strerror}); {untouched}") from None
    if (what := not_regular(mode)) is not None:
        raise ConfigError(f"{file} is {what}, not a collective {kind.name} file; {untouched}")
    if not os.access(file, os.R_OK):
        raise ConfigError(f"cannot read {file} (permission denied); {untouched}")
    if os.stat(file).st_size == 0:
        return True
    try:
        with contextlib.closing(_read_only(file.resolve())) as db:
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
            columns = {
                table: tuple(r[1] for r in db.execute(f"PRAGMA table_info({table})"))
                for other in KINDS
                for table in other.columns
            }
    except sqlite3.DatabaseError as exc:
        raise ConfigError(
            f"cannot open {kind.name} {file}: {file} is not a database ({exc}); it was left "
            f"untouched: move it aside (mv {file} {file}.bad) or use another file for the "
            f"{kind.name}, {kind.point_elsewhere}"
        ) from None
    if not names:
        return True
    marked = next((k for k in KINDS if k.application_id == app_id), None)
    if marked is kind or (marked is None and kind.holds(names, columns)):
        return False
    other = marked or next((k for k in KINDS if k.holds(names, columns)), None)
    if other is not None:
        what = f"collective's {other.name}"
    else:
        tables = ", ".join(sorted(n for n in names if not n.startswith("sqlite_"))[:6])
        what = f"a SQLite database of another program (it holds {tables})"
    raise ConfigError(f"{file} is {what}, not a collective {kind.name}; {untouched}")


def mark_new(db: sqlite3.Connection, kind: DatabaseKind) -> None:
    """Mark a database collective has just created as `kind` (before its tables)."""
    db.execute(f"PRAGMA application_id = {kind.application_id}")


def create_new(path: str | os.PathLike[str], kind: DatabaseKind) -> None:
    """Create the empty file (and its folders) of a new `kind` database, or say why not.

    Raises:
        ConfigError: The place is not writable (a read-only mount, no permission, ...).
    """
    file = Path(path)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(file, os.O_WRONLY | os.O_CREAT, 0o644))
    except OSError as exc:
        raise ConfigError(
            f"cannot write {file} ({exc.strerror}) for a new {kind.name}: run from a writable "
            f"directory or use another file, {kind.point_elsewhere}"
        ) from None
