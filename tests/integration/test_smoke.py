"""`collective smoke` against the real llama-server and the Ollama-protocol test server."""

import json
import os
import socket

import pytest
from typer.testing import CliRunner

from collective.cli import app

pytestmark = pytest.mark.integration
KEEP_ENV = ("COLLECTIVE_CACHE", "COLLECTIVE_EMBEDDED_MODEL")  # model cache, fast test model

OLLAMA_MODEL = "gemma3:270m"  # what the `ollama_server` fixture serves (conftest.py)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name not in KEEP_ENV:
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def config(tmp_path, llama_url, ollama_url, model=OLLAMA_MODEL, kv=""):
    path = tmp_path / "deploy.toml"
    path.write_text(
        f'planner = "llama-server:{llama_url}{kv}"\n'
        f'judge = "ollama:{model}@{ollama_url}"\n'
        f'chat = "ollama:{model}@{ollama_url}"\n'
        "k = 2\n"
        f'[[specialists]]\nbackend = "llama-server:{llama_url}{kv}"\ncount = 2\n'
        "[output_caps]\nplanner = 16\nspecialist = 32\njudge = 32\nchat = 32\n"
    )
    return path


def smoke(*args):
    result = CliRunner().invoke(app, ["smoke", *args, "--json"])
    return result.exit_code, json.loads(result.stdout), result


def test_smoke_passes_and_warns_loudly_about_small_slots(workdir, llama_server, ollama_server):
    # -np 2 without --kv-unified: independent slots, said so in the spec.
    path = config(workdir, llama_server.url, ollama_server.url, kv="?kv=per-slot")
    code, report, result = smoke("--config", str(path))
    assert code == 0, result.output
    checks = {(c["check"], c["target"]): c for c in report["checks"]}
    assert checks[("reachable", f"llama-server:{llama_server.url}")]["status"] == "pass"
    assert checks[("model", f"llama-server:{llama_server.url}")]["detail"].startswith("/props")
    ollama_spec = f"ollama:{OLLAMA_MODEL}@{ollama_server.url}"
    assert checks[("model", ollama_spec)]["status"] == "pass"
    assert "/api/tags lists" in checks[("model", ollama_spec)]["detail"]
    # 4,096-token slots (-c 8192 -np 2) under the 32,768-token specialist preset.
    slot = checks[("context", f"specialist @ llama-server:{llama_server.url}")]
    assert slot["status"] == "warn"
    assert "SLOT SMALLER THAN PRESET: n_ctx 4,096 < specialist preset 32,768" in slot["detail"]
    assert "-c $((32768*K)) -np K" in slot["detail"]
    pool = checks[("pool", f"llama-server:{llama_server.url}")]
    assert pool["status"] == "pass" and "2 independent slots of 4,096 tokens" in pool["detail"]
    assert checks[("pool", ollama_spec)]["status"] == "pass"  # no specialist there
    judge = checks[("context", f"judge @ {ollama_spec}")]
    assert judge["status"] == "warn" and "judge preset 131,072" in judge["detail"]
    assert checks[("council run", "k=2")]["status"] in ("pass", "warn")
    assert checks[("budget reports", "k=2")]["status"] == "pass"
    # per server, the shared prefix tokens each member reused (llama-server's cache_n)
    reuse = checks[("prefix reuse", f"llama-server:{llama_server.url}?kv=per-slot")]
    assert "specialist-1 " in reuse["detail"] and "specialist-2 " in reuse["detail"]
    assert reuse["status"] in ("pass", "warn")
    assert not [c for c in report["checks"] if c["status"] == "fail"]
    assert report["ok"] is True

    # Unsaid, two slots are read as one pool of 4,096 tokens: two specialists of ~3,000 would
    # take turns, and smoke says so.
    path = config(workdir, llama_server.url, ollama_server.url)
    _, report, _ = smoke("--config", str(path), "--no-council")
    checks = {(c["check"], c["target"]): c for c in report["checks"]}
    pool = checks[("pool", f"llama-server:{llama_server.url}")]
    assert pool["status"] == "warn" and "POOL SMALLER THAN THE COUNCIL" in pool["detail"]
    assert "2 slots sharing one 4,096-token KV pool" in pool["detail"]
    assert "?kv=per-slot" in pool["detail"]

    strict = CliRunner().invoke(app, ["smoke", "--config", str(path), "--strict", "--no-council"])
    assert strict.exit_code == 1  # warnings fail under --strict
    assert "WARN" in strict.stdout and "FAIL" in strict.stdout


def test_smoke_fails_on_a_missing_model_and_an_unreachable_server(
    workdir, llama_server, ollama_server
):
    path = config(workdir, llama_server.url, ollama_server.url, model="no-such-model")
    code, report, _ = smoke("--config", str(path))
    assert code == 1 and report["ok"] is False
    statuses = {(c["check"], c["target"]): c["status"] for c in report["checks"]}
    assert statuses[("council run", "")] == "fail"  # skipped: failures above
    failing = [c for c in report["checks"] if c["status"] == "fail" and c["check"] != "council run"]
    assert failing and all("no-such-model" in c["detail"] for c in failing)

    dead = f"http://127.0.0.1:{free_port()}"
    path = config(workdir, dead, ollama_server.url)
    code, report, _ = smoke("--config", str(path), "--no-council")
    assert code == 1
    unreachable = [c for c in report["checks"] if c["target"] == f"llama-server:{dead}"]
    assert unreachable[0]["check"] == "reachable" and unreachable[0]["status"] == "fail"
    assert "cannot connect" in unreachable[0]["detail"]


def test_smoke_table_for_people(workdir, llama_server, ollama_server):
    path = config(workdir, llama_server.url, ollama_server.url)
    result = CliRunner().invoke(app, ["smoke", "--config", str(path), "--no-council"])
    assert result.exit_code == 0, result.output
    assert "collective smoke" in result.stdout and "PASS" in result.stdout
    assert "smoke: PASS" in result.stdout and "warnings)" in result.stdout


def test_smoke_passes_with_openai_roles_on_the_real_llama_server(workdir, llama_server):
    spec = f"openai:gemma@{llama_server.url}"
    path = workdir / "openai.toml"
    path.write_text(
        f'planner = "{spec}"\njudge = "{spec}"\nchat = "{spec}"\nk = 2\n'
        f'[[specialists]]\nbackend = "{spec}"\ncount = 2\n'
        "[output_caps]\nplanner = 16\nspecialist = 32\njudge = 32\nchat = 32\n"
    )
    code, report, result = smoke("--config", str(path))
    assert code == 0, result.output
    checks = {(c["check"], c["target"]): c for c in report["checks"]}
    assert checks[("reachable", spec)]["status"] == "pass"
    assert checks[("model", spec)]["detail"] == "/v1/models: gemma, window 4,096"
    assert checks[("context", f"judge @ {spec}")]["status"] == "warn"  # 4,096 < 131,072
    assert checks[("council run", "k=2")]["status"] in ("pass", "warn")
    assert checks[("budget reports", "k=2")]["status"] == "pass"
    assert report["ok"] is True


def test_smoke_checks_every_replica_on_its_own(workdir, llama_server):
    live, dead = f"llama-server:{llama_server.url}", f"llama-server:http://127.0.0.1:{free_port()}"
    path = workdir / "replicas.toml"
    path.write_text(
        f'planner = "{live}"\njudge = "{live}"\nk = 2\n'
        f'[[specialists]]\nbackend = ["{live}", "{dead}"]\ncount = 2\n'
    )
    code, report, _ = smoke("--config", str(path), "--no-council")
    checks = {(c["check"], c["target"]): c for c in report["checks"]}
    assert checks[("reachable", live)]["status"] == "pass"
    assert checks[("reachable", dead)]["status"] == "fail"  # named on its own
    assert "cannot connect" in checks[("reachable", dead)]["detail"]
    assert code == 1
