"""The stress harness reduced to one round per phase (`bench/stress.py --rounds 1`).

On the real llama-server: n_cmpl beside plain requests, and a replica killed mid-answer; with
`COLLECTIVE_STRESS=1` also n_cmpl at `-np 4`, the planner's slot restored into the idle slots
before the members (47 s alone at load 3.7), and a router loading and unloading two models
under load (one round of the other four took 272 s on two shared cores at load 11, most of it
the router loading the 0.5B again and again; the two default phases took 62 s at load 3). Every
choice asked for comes back and is its prompt's answer sent alone at temperature 0; no
overflow, no crash; the kill is named in the run's notes. `make stress` runs the full size.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ALL = os.environ.get("COLLECTIVE_STRESS") == "1"
EVERY = ["ncmpl-np2", "ncmpl-np4", "router", "slot-restore", "replicas"]
PHASES = EVERY if ALL else ["ncmpl-np2", "replicas"]


def test_one_round_of_each_phase_mixes_and_loses_no_choice(
    llama_server_binary: str, gguf_path: Path, tmp_path: Path
) -> None:
    figures = tmp_path / "stress.json"
    argv = [sys.executable, str(REPO / "bench" / "stress.py"), "--rounds", "1"]
    argv += ["--phases", ",".join(PHASES), "--json", str(figures)]
    argv += ["--server-binary", llama_server_binary]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    print(done.stdout)  # the table and the run's notes (bench/README.md quotes them)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    phases = {p["name"]: p for p in json.loads(figures.read_text())["phases"]}
    assert list(phases) == PHASES
    for name, phase in phases.items():
        assert phase["requests"] == (3 if name == "slot-restore" else 6), name
        assert phase["compared"] == phase["expected"], phase
        assert (phase["interleaved"], phase["lost"]) == (0, 0), phase
        assert (phase["overflows"], phase["crashes"], phase["problems"]) == (0, 0, []), phase
    # an n_cmpl request is one request for N completions: two of them in each round
    assert phases["ncmpl-np2"]["expected"] == 2 * 2 + 4
    if ALL:
        assert phases["ncmpl-np4"]["expected"] == 2 * 4 + 4
        assert phases["router"]["expected"] == 2 * (2 + 1 + 1)
        assert any("loaded a model" in n for n in phases["router"]["notes"])
        assert phases["slot-restore"]["expected"] == 3
        assert any("3 of 3 members reused" in n for n in phases["slot-restore"]["notes"])
    replicas = phases["replicas"]
    assert replicas["caused"] == replicas["named"] == 1  # the kill happened and is named
    assert replicas["retries"] >= 1  # the call lost mid-answer was retried, and came back whole
    assert any("failed mid-answer" in n for n in replicas["notes"]), replicas["notes"]
    assert "interleaved" in done.stdout and "replicas" in done.stdout  # the table
