"""A lost replica is named where the user looks (issue 38), on real servers over real HTTP.

The same faults as tests/integration/test_replicas.py (there on two real llama-servers), here on
two Ollama-protocol servers backed by the real gemma model: one killed as a specialist writes
its answer on it, and one never started. The user sees which server, what failed and what was
done instead in `--json`'s notes, `--quiet`'s notes line and each budget report's `faults`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    OLLAMA_MODEL,
    ServerProcess,
    _ollama_protocol_server,
    council_killing,
    free_port,
)

from collective.budget.plans import ModelBudget
from collective.graph import CouncilContext
from collective.kb.demo import open_default_store
from tests.cli import run

pytestmark = pytest.mark.integration

QUESTION = "Which filament survives a hot car?"
SLOT = 2048


def plan(name: str, sections: dict[str, int], output: int = 16) -> ModelBudget:
    return ModelBudget(name, SLOT, sum(sections.values()), output, sections)


@pytest.fixture(scope="module")
def servers(gguf_path: Path) -> Iterator[list[ServerProcess]]:
    first, second = _ollama_protocol_server(gguf_path), _ollama_protocol_server(gguf_path)
    try:
        yield [next(first), next(second)]
    finally:
        for each in (first, second):
            each.close()


def spec(server: ServerProcess | str) -> str:
    url = server if isinstance(server, str) else server.url
    return f"ollama:{OLLAMA_MODEL}@{url}"


async def test_a_replica_killed_mid_answer_is_named_with_what_was_done_instead(
    servers: list[ServerProcess], tmp_path: Path
) -> None:
    a, b = servers
    open_default_store(tmp_path / "kb.sqlite").close()
    both = f"{spec(a)} | {spec(b)}"
    ctx = CouncilContext(
        k=1,
        planner=both,
        specialists=(both,),
        judge=spec(b),  # drafting beside the member, the judge leaves `a` to it
        judge_tools=False,
        kb=str(tmp_path / "kb.sqlite"),
        retrieval="lean",
        budgets={
            "planner": plan("planner", {"system": 200, "kb_chunks": 100, "task": 100}),
            # an answer long enough to be killed in the middle of it
            "specialist": plan("specialist", {"system": 300, "kb_chunks": 300, "task": 150}, 200),
            "judge": plan(
                "judge", {"system": 200, "kb_chunks": 100, "proposals": 400, "task": 100}
            ),
        },
        temperature=0.0,
        usage_log=None,
    )
    lost = f"replica {spec(a)} failed mid-answer"

    def kill_at(event: dict) -> bool:  # `a` idle, the member is placed on it: its first token
        return event.get("type") == "token" and event["node"] == "specialist-1"

    # On a loaded machine the first token's event can reach the test after the member has
    # finished its answer: a kill that came too late, tried again.
    *_, out = await council_killing(
        a, QUESTION, ctx, kill_at, lambda out: any(lost in n for n in out["notes"])
    )
    [member] = out["proposals"]
    assert member["error"] is None and member["text"].strip() and out["answer"].strip()
    mid = [n for n in out["notes"] if lost in n]
    assert mid and mid[0].startswith("specialist-1: "), out["notes"]
    assert "a council node retries it once on a live replica" in mid[0]
    reports = {r["node"]: r for r in out["budgets"]}
    assert reports["specialist-1"]["server"] == spec(b)  # the retry ran on the live replica
    [fault] = reports["specialist-1"]["faults"]  # the retry names the dead one, and where it ran
    assert fault["server"] == spec(a) and fault["instead"] == f"the call ran on {spec(b)}"
    assert f"specialist-1: {fault['message']}" in out["notes"]
    print("\n".join(out["notes"]))  # what README's replica section quotes


def test_a_replica_never_started_is_named_in_json_and_quiet_output(
    servers: list[ServerProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = servers
    never = spec(f"http://127.0.0.1:{free_port()}")
    both = json.dumps([spec(a), never])
    open_default_store(tmp_path / "kb.sqlite").close()
    (tmp_path / "replicas.toml").write_text(
        f'planner = {both}\njudge = [{both}]\nk = 1\nretrieval = "lean"\njudge_tools = false\n'
        f"[[specialists]]\nbackend = {both}\ncount = 1\n"
        "[output_caps]\nplanner = 16\nspecialist = 16\njudge = 16\n"
    )
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name not in ("COLLECTIVE_CACHE",):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    args = ["ask", QUESTION, "--config", "replicas.toml", "--kb", "kb.sqlite"]
    status, out, err = run([*args, "--json"])
    assert status == 0, err + out
    result = json.loads(out)
    notes = result["notes"]
    # before the run: the roles, the server, what failed and what the run does instead
    before = [n for n in notes if f"replica {never} does not answer" in n]
    assert before and "the run uses the 1 of 2 replicas that answer" in before[0], notes
    for report in result["budgets"]:  # every call that left it out says so, and where it ran
        [fault] = report["faults"]
        assert fault["server"] == never and "its KV pool could not be read" in fault["failed"]
        assert fault["instead"] == f"the call ran on {spec(a)}"
        assert f"{report['node']}: {fault['message']}" in notes
    status, out, err = run([*args, "--quiet"])
    assert status == 0, err + out
    flat = " ".join(out.split())  # the notes line, however the terminal wrapped it
    assert f"notes: planner/specialist/judge: replica {never} does not answer" in flat, out
    print("\n".join(notes))
