"""Concurrent first runs in one directory seed the demo KB once, and every run sees all of it."""

import subprocess
import sys
from pathlib import Path

from collective.kb.demo import open_default_store

REPO = Path(__file__).resolve().parents[2]

WORKER = """
import os, sys, time
from pathlib import Path
go = Path("go")
while not go.exists():
    time.sleep(0.005)
import collective.kb.sqlite_store as sqlite_store
from collective.kb.demo import open_default_store
real = sqlite_store.SqliteKnowledgeStore.add_paths
def counted(self, *args, **kwargs):
    print("seeding", flush=True)
    return real(self, *args, **kwargs)
sqlite_store.SqliteKnowledgeStore.add_paths = counted
store = open_default_store()
print("chunks", store.count(), flush=True)
"""


def test_concurrent_first_runs_seed_once_and_all_see_the_whole_kb(tmp_path):
    expected = open_default_store(tmp_path / "reference.sqlite").count()
    assert expected > 0
    work = tmp_path / "work"
    work.mkdir()
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER], cwd=work, env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    (work / "go").touch()  # all start seeding at the same moment
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sum(out.count("seeding") for out in outs) == 1
    assert all(f"chunks {expected}" in out for out in outs), outs
    leftovers = sorted(p.name for p in (work / ".collective").iterdir())
    assert leftovers == ["kb.sqlite", "kb.sqlite.lock"]
