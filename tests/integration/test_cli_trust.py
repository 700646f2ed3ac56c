"""`collective ask` that a person can trust (issue 15), against the real llama-server.

Every role runs on one llama-server with the gemma model; tiny output caps keep a run short.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from collective.cli import app

pytestmark = pytest.mark.integration
KEEP_ENV = ("COLLECTIVE_CACHE", "COLLECTIVE_EMBEDDED_MODEL")  # model cache, fast test model

QUESTION = "Is PLA food safe?"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def workdir(tmp_path, monkeypatch, llama_server):
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name not in KEEP_ENV:
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    url = llama_server.url
    (tmp_path / "collective.toml").write_text(
        f'planner = "llama-server:{url}"\njudge = "llama-server:{url}"\nk = 3\n'
        'judge_tools = false\nretrieval = "lean"\nmax_inject = 1\n'
        f'[[specialists]]\nbackend = "llama-server:{url}"\ncount = 1\n'
        "[output_caps]\nplanner = 24\nspecialist = 64\njudge = 8\nchat = 16\n"
    )
    return tmp_path


def invoke(*args):
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def pending_nodes(db, thread):
    from langgraph.checkpoint.sqlite import SqliteSaver

    from collective.graph import build_graph

    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        graph = build_graph(checkpointer=SqliteSaver(conn))
        return graph.get_state({"configurable": {"thread_id": thread}}).next
    finally:
        conn.close()


def usage_agents(workdir):
    log = workdir / ".collective" / "usage.jsonl"
    if not log.exists():
        return []
    return [json.loads(line)["agent"] for line in log.read_text().splitlines()]


@pytest.mark.timeout(900)  # four model calls on a 2-core machine shared by other work
def test_a_resume_keeps_the_runs_settings_and_ctrl_c_says_stopping(workdir):
    argv = [sys.executable, "-m", "collective.cli", "ask", QUESTION, "--k", "1", "-t", "cc2"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    db = str(workdir / ".collective" / "checkpoints.sqlite")
    deadline = time.monotonic() + 300  # a loaded machine is slow; the order is what counts
    while time.monotonic() < deadline:  # until the specialist is under way
        try:
            if os.path.exists(db) and "specialist" in pending_nodes(db, "cc2"):
                break
        except sqlite3.OperationalError:
            pass
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the run never reached the specialists")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "stopping..." in err
    assert err.index("stopping...") < err.index("interrupted (Ctrl-C)")
    assert "collective ask --thread cc2" in err

    # The thread started with --k 1: asking for another k on resume is refused, untouched.
    status, out, err = invoke("ask", "--thread", "cc2", "--k", "3")
    assert status == 2
    assert "thread cc2 was started with k 1 (now 3)" in err and "leave out --k" in err
    assert "specialist" in pending_nodes(db, "cc2")

    # The resume runs with k = 1 (the config file says 3): no quorum failure.
    status, out, err = invoke("ask", "--thread", "cc2")
    assert status == 0, err
    assert "resuming the unfinished run of thread cc2" in err
    # The live view shows what the checkpoint restored as such, not `waiting`.
    plan_row = next(line for line in err.splitlines() if line.strip().startswith("plan "))
    assert "restored" in plan_row
    assert "specialist-2" not in err  # one member, as the run started
    assert "waiting" not in err.split("resuming")[-1]
    assert usage_agents(workdir).count("plan") == 1
    assert not pending_nodes(db, "cc2")
    # An 8-token verdict stops at its cap: the terminal says so (finish_reason length).
    assert "✂ the verdict was cut at its output cap (8 tokens" in out


@pytest.mark.timeout(900)
def test_a_failed_run_names_its_thread(workdir):
    text = (workdir / "collective.toml").read_text()
    (workdir / "collective.toml").write_text("specialist_timeout_s = 0.001\n" + text)
    status, out, err = invoke("ask", QUESTION, "--k", "1", "--json", "--quiet")
    assert status == 1
    error = json.loads(out)["error"]
    assert error["type"] == "QuorumError" and len(error["thread_id"]) == 12
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "below the quorum" in lines[0]
    assert f"thread {error['thread_id']}" in lines[0]


@pytest.mark.timeout(900)
def test_chat_turns_are_in_the_usage_log(workdir):
    line = "Is PLA food safe? " + "x" * 9_000  # over-long: cut like a council question
    result = CliRunner().invoke(app, ["chat", "--thread", "c1"], input=f"{line}\n/exit\n")
    assert result.exit_code == 0, result.output
    assert "the question was cut to 8,000 of its" in result.output
    assert usage_agents(workdir) == ["chat"]
    status, out, _ = invoke("allowances", "report", "--json")
    assert status == 0 and [a["agent"] for a in json.loads(out)["agents"]] == ["chat"]


def test_preflight_fails_fast_on_a_missing_judge_and_runs_nothing(workdir, llama_server):
    port = closed_port()
    text = (workdir / "collective.toml").read_text()
    text = text.replace(
        f'judge = "llama-server:{llama_server.url}"',
        f'judge = "llama-server:http://127.0.0.1:{port}"',
    )
    (workdir / "collective.toml").write_text(text)
    status, out, err = invoke("ask", QUESTION, "--k", "1", "--json")
    assert status == 3
    error = json.loads(out)["error"]
    assert error["type"] == "BackendUnavailable"
    assert (
        "preflight" in error["message"]
        and f"judge llama-server:http://127.0.0.1:{port}" in (error["message"])
    )
    assert "collective smoke" in error["message"]
    assert usage_agents(workdir) == []  # not even the plan ran


NATIVE_LOAD = """
import sys
import llama_cpp
import llama_cpp._logger
from llama_cpp._internals import LlamaContext, LlamaModel
from collective.cli import main
try:
    main(sys.argv[2:] + ["config", "show", "--json"])
except SystemExit:
    pass
model = LlamaModel(  # as the in-process backend loads it
    path_model=sys.argv[1], params=llama_cpp.llama_model_default_params(), verbose=False
)
llama_cpp._logger.set_verbose(False)  # what every Llama(verbose=False) does
params = llama_cpp.llama_context_default_params()
params.n_ctx = 512
LlamaContext(model=model, params=params, verbose=False)  # llama.cpp logs its KV cache here
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_native_llama_cpp_logs_only_with_verbose(tmp_path, gguf_path, verbose):
    argv = [sys.executable, "-c", NATIVE_LOAD, str(gguf_path), *(["--verbose"] if verbose else [])]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    native = [line for line in done.stderr.splitlines() if line.startswith(("llama_", "load"))]
    assert bool(native) == verbose, done.stderr[-2000:]
