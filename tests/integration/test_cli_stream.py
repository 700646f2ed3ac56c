"""Ctrl-C in `collective ask` while a specialist generates on the real llama-server.

The CLI must stop mid-generation (not when the answer is done), llama-server must free the slot
(the closed stream stops it), the checkpoint must stay, and the thread must resume.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import ServerProcess
from test_streaming_real import gemma_server  # noqa: F401  (the module's llama-server)
from typer.testing import CliRunner

from collective.cli import app

pytestmark = pytest.mark.integration

CAP = 160
"""The specialist's cap (the prompt and it fit a slot, so the request asks for exactly it)."""
QUESTION = "Write a long, detailed guide to printing PETG: every setting, step by step."


def slots(url: str) -> list[dict]:
    return httpx.get(f"{url}/slots", timeout=10).json()


def decoded(slot: dict) -> int:
    return int((slot.get("next_token") or [{}])[0].get("n_decoded", 0))


def specialist_generating(slot: dict) -> bool:
    """The slot writes the specialist's answer (its cap tells it from the planner's, judge's)."""
    asked = slot.get("params", {}).get("n_predict")
    return bool(slot["is_processing"]) and asked == CAP and decoded(slot) > 2


@pytest.mark.timeout(900)  # the resumed run generates the whole answer on 2 shared cores
def test_ctrl_c_mid_generation_frees_the_slot_and_the_thread_resumes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gemma_server: ServerProcess,  # noqa: F811
) -> None:
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name not in ("COLLECTIVE_CACHE",):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    spec = f"llama-server:{gemma_server.url}"
    (tmp_path / "collective.toml").write_text(
        f'k = 1\nplanner = "{spec}"\njudge = "{spec}"\ntemperature = 0.0\n'
        f'[[specialists]]\nbackend = "{spec}"\ncount = 1\n'
        f"[output_caps]\nplanner = 8\nspecialist = {CAP}\njudge = 16\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "collective.cli", "ask", QUESTION, "--thread", "cc"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if any(specialist_generating(s) for s in slots(gemma_server.url)):
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"no generation under way: {proc.poll()} {proc.stderr.read()[-2000:]}")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)  # generous: it stops within a token
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and out == ""
    # The slot is free, and it stopped before the answer was done: the closed stream stopped it.
    for _ in range(100):
        state = slots(gemma_server.url)
        if not any(s["is_processing"] for s in state):
            break
        time.sleep(0.1)
    assert not any(s["is_processing"] for s in state), state
    assert all(decoded(s) < CAP for s in state), state

    result = CliRunner().invoke(app, ["ask", "--thread", "cc", "--json"])
    assert result.exit_code == 0, (result.output, err)  # err: what the interrupted run said
    resumed = json.loads(result.stdout.strip().splitlines()[-1])
    assert resumed["question"] == QUESTION and resumed["answer"]
    assert [p["member"] for p in resumed["proposals"]] == ["specialist-1"]
