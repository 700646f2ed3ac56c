"""Reading a file the user names (a config, a KB document, a question) without hanging on it.

A path may name something that is not a file: a directory, a named pipe (a plain read waits
for a writer forever), a device (`/dev/zero` never ends), a socket. `read_regular_file` opens
without blocking, checks the open descriptor, and reads at most `limit` bytes, so such a path
is one clear refusal instead of a hang or a process eating memory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from collective.errors import ConfigError

__all__ = ["not_regular", "read_regular_file"]

_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def not_regular(mode: int) -> str | None:
    """What a `st_mode` that is not a regular file is (`a directory`, ...); None: regular."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _NOT_REGULAR if test(mode)), "not a regular file")


def read_regular_file(file: Path, *, limit: int, what: str = "", fix: str = "") -> bytes:
    """The bytes of `file`, a regular file (or a link to one) of at most `limit` bytes.

    Opened without blocking and checked on the open descriptor, so a FIFO is refused at once
    and nothing can swap the file in between; at most `limit` + 1 bytes are ever read (a
    file in /proc reports no size).

    Args:
        file: The path.
        limit: The most bytes accepted.
        what: What the file is for the messages (`config file`, `question file`).
        fix: What to do instead, appended to a refusal (e.g. `give a TOML file`).

    Raises:
        ConfigError: Missing, a dangling link, not a regular file, unreadable, or too large.
    """
    then = f"; {fix}" if fix else ""
    name = f"{what} {file}" if what else str(file)
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        if file.is_symlink():
            raise ConfigError(
                f"{name} is a symbolic link to {os.readlink(file)}, which does not "
                "exist; fix or remove the link"
            ) from None
        raise ConfigError(f"no such {what or 'file'}: {file}; check the path") from None
    except OSError as exc:  # a socket (ENXIO), no permission, ...
        if file.is_socket():
            raise ConfigError(f"{name} is a socket, not a regular file{then}") from None
        raise ConfigError(f"cannot read {name}: {exc.strerror}; check its permissions") from None
    kind = not_regular(os.fstat(fd).st_mode)
    if kind is not None:  # checked before `fdopen`, which refuses a directory itself
        os.close(fd)
        raise ConfigError(f"{name} is {kind}, not a regular file{then}")
    with os.fdopen(fd, "rb") as stream:
        try:
            data = stream.read(limit + 1)
        except OSError as exc:
            raise ConfigError(f"cannot read {name}: {exc.strerror}{then}") from None
    if len(data) > limit:
        raise ConfigError(f"{name} is larger than {_size(limit)}, the most accepted{then}")
    return data


def _size(limit: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit >= size and limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit:,} bytes"
