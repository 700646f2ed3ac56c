"""LangGraph's own dev server loads langgraph.json and runs the council through langgraph_sdk."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import REPO, asked_again, free_port
from langgraph_sdk import get_client

from collective.verdict.support import plain

pytestmark = pytest.mark.integration


@pytest.fixture
def dev_server(tmp_path, gguf_path):
    cli = Path(sys.executable).with_name("langgraph")
    if not cli.exists():
        pytest.fail("langgraph-cli is not installed; `make test` installs it with the test extras")
    port = free_port()
    env = {
        **os.environ,
        "COLLECTIVE_KB": str(tmp_path / "kb.sqlite"),
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
    }
    log = (tmp_path / "dev.log").open("wb")
    workdir = tmp_path / "app"  # langgraph dev writes .langgraph_api/ next to its config
    workdir.mkdir()
    shutil.copy(REPO / "langgraph.json", workdir / "langgraph.json")
    config = (workdir / "langgraph.json").read_text().replace("./collective", f"{REPO}/collective")
    (workdir / "langgraph.json").write_text(config.replace('["."]', f'["{REPO}"]'))
    proc = subprocess.Popen(
        [
            str(cli),
            "dev",
            "--no-browser",
            "--no-reload",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--config",
            str(workdir / "langgraph.json"),
        ],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"langgraph dev exited: {(tmp_path / 'dev.log').read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            pytest.fail(f"langgraph dev not ready: {(tmp_path / 'dev.log').read_text()[-3000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


async def test_langgraph_dev_serves_the_council(dev_server, tmp_path):
    client = get_client(url=dev_server)
    assistants = await client.assistants.search(graph_id="collective")
    assert assistants, "langgraph dev did not register the collective graph"
    thread = await client.threads.create()
    out: dict = {}
    verdict: list[str] = []  # the judge's tokens, as LangGraph's messages-tuple mode sends them
    async for part in client.runs.stream(
        thread["thread_id"],
        "collective",
        input={"question": "Is PLA a good choice for a part in a hot car?"},
        context={
            "k": 1,
            "output_caps": {"planner": 32, "specialist": 64, "judge": 64},
            "temperature": 0.0,
            # An explicit budget table as plain JSON (it was `unhashable type: 'dict'`).
            "budgets": {
                "specialist": {
                    "n_ctx": 8192,
                    "output": 256,
                    "sections": {"system": 800, "kb_chunks": 3000, "task": 600},
                }
            },
        },
        stream_mode=["values", "messages-tuple"],
    ):
        if part.event == "values":
            out = part.data
        elif part.event == "messages":
            message, meta = part.data
            if meta.get("agent") == "judge":
                # the verdict is written in the draft node, beside the specialists
                assert meta["langgraph_node"] == "draft" and "judge" in meta["tags"]
                verdict.append(message["content"])
    log = (tmp_path / "dev.log").read_text()
    assert isinstance(out, dict) and out.get("answer"), f"no answer: {out}\n{log[-3000:]}"
    fix = ["judge"] if "revised" in out["claim_check"] else []  # the call that fixed claims
    # the verdict streams as written; the answer is what the claim check made of it (cleaned,
    # retagged, a failed claim fixed or dropped), so each of its claims was streamed or checked
    streamed = "".join(verdict)
    assert len(verdict) > 1 and streamed.strip(), verdict
    said = plain(out["answer"])
    assert all(c["text"] in said for c in out["claims"] if c["status"] != "dropped")
    # in the order the calls finished: the judge drafts beside the specialist (no planner: the
    # default has none)
    nodes = sorted(b["node"] for b in out["budgets"])
    assert nodes == sorted(["specialist-1", "judge", *fix, *asked_again(out["budgets"])])
    assert all(b["token_counter"] == "exact:llama.cpp" for b in out["budgets"])
    specialist = [b for b in out["budgets"] if b["node"] == "specialist-1"][0]
    assert {s["name"] for s in specialist["sections"]} == {"system", "kb_chunks", "task"}


async def test_langgraph_dev_serves_the_input_output_and_context_schemas(dev_server):
    """Studio's input form and the SDK read these; they were empty on Python 3.11."""
    client = get_client(url=dev_server)
    (assistant,) = await client.assistants.search(graph_id="collective")
    schemas = await client.assistants.get_schemas(assistant["assistant_id"])
    assert schemas["input_schema"]["required"] == ["question"]
    assert {"answer", "citations", "proposals", "budgets"} <= set(
        schemas["output_schema"]["properties"]
    )
    context = schemas["context_schema"]["properties"]
    assert {"k", "judge", "specialists", "budgets", "user_id", "memory_scope"} <= set(context)
    assert [t["type"] for t in context["planner"]["anyOf"]] == ["string", "null"]
