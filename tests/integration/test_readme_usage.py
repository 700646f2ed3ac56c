"""Every `collective` command of the README and the guides runs as written (issues 15, 55).

The commands (`tests.docs_pages.commands`: every `sh` block of README.md and docs/, each
command once, in page order) run through the console script's entry point, in a working
directory whose `collective.toml` puts every role on one real llama-server with small explicit
budgets, and which holds the files the commands name (`notes/`, `my-questions.jsonl`,
`thorough.toml` from docs/kb.md). Only the elided question (`"..."`) is filled in. `make`
commands are their own targets (tests/unit/test_docs.py checks that each exists).
"""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collective.cli import main
from tests.docs_pages import REPO, blocks, commands

pytestmark = pytest.mark.integration

SMALL_BUDGETS = """
[budgets.planner]
n_ctx = 2048
output = 16
sections = { system = 300, task = 200, kb_chunks = 300, safety_margin = 100 }
[budgets.specialist]
n_ctx = 2048
output = 24
sections = { system = 300, task = 300, kb_chunks = 400, safety_margin = 100 }
[budgets.judge]
n_ctx = 2048
output = 16
sections = { system = 300, task = 200, kb_chunks = 300, proposals = 400, safety_margin = 100 }
[budgets.chat]
n_ctx = 2048
output = 16
sections = { system = 300, conversation_summary = 200, task = 300, safety_margin = 100 }
"""


QUESTIONS = [
    {"id": "petg-dry", "question": "At what temperature should PETG dry?", "numbers": [65]},
]


def usage_commands() -> list[list[str]]:
    """The argv of each `collective` command the README and the guides show."""
    return [argv for argv in commands() if argv[0] == "collective"]


def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    with CliRunner().isolation(input=stdin) as streams:
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        return code, streams[0].getvalue().decode(), streams[1].getvalue().decode()


def workdir(tmp_path: Path, url: str) -> None:
    """The files the pages' commands name, and a config that puts every role on `url`."""
    config = (
        f'planner = "{url}"\njudge = "{url}"\nk = 1\njudge_tools = false\n'
        f'[[specialists]]\nbackend = "{url}"\ncount = 1\n' + SMALL_BUDGETS
    )
    (tmp_path / "collective.toml").write_text(config)
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "collective.toml").write_text(config)
    for folder in ("docs", "notes"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "petg.md").write_text(
            "# PETG\n\n## Drying\nDry PETG at 65 °C for four hours before printing.\n"
        )
    lines = "".join(json.dumps(q) + "\n" for q in QUESTIONS)
    (tmp_path / "my-questions.jsonl").write_text(lines)
    (declared,) = [b for b in blocks(REPO / "docs" / "kb.md", "toml") if "retrieval_profiles" in b]
    (tmp_path / "thorough.toml").write_text(declared)


def test_the_pages_show_the_commands_a_newcomer_needs():
    names = {argv[1] for argv in usage_commands()}
    assert {"ask", "chat", "smoke", "config", "kb", "recall", "eval", "threads"} <= names


@pytest.mark.timeout(2400)  # a few dozen small model calls on a shared 2-core machine
def test_every_command_of_the_pages_runs(tmp_path, monkeypatch, llama_server):
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name != "COLLECTIVE_CACHE":
            monkeypatch.delenv(name)
    monkeypatch.setenv("COLLECTIVE_RERANK", "none")  # deep's reranker would load the 1.5B
    monkeypatch.chdir(tmp_path)
    workdir(tmp_path, f"llama-server:{llama_server.url}")
    for argv in usage_commands():
        args = ["Is PLA food safe?" if a == "..." else a for a in argv[1:]]
        started = time.monotonic()
        status, out, err = run(args, stdin="/exit\n" if args[0] == "chat" else None)
        print(f"{shlex.join(argv)}: exit {status} in {time.monotonic() - started:.0f} s")
        assert status == 0, f"{shlex.join(argv)} exited {status}: {err[-2000:]}"
        assert "Traceback" not in err
    # The commands did their work: the notes in the KB, every arm of the eval in its rows,
    # recall under the declared profile, the conversation on thread car.
    status, out, _ = run(["kb", "list", "--kb", "my.sqlite", "--json"])
    assert any(c["source"].endswith("petg.md") for c in json.loads(out)["chunks"])
    rows = [json.loads(line) for line in (tmp_path / "my-eval.jsonl").read_text().splitlines()]
    arms = {arm for row in rows for arm in row["arms"]}
    assert arms >= {"single", "self-consistency", "self-moa", "council", "council-split"}
    argv = ["recall", "PETG", "--config", "thorough.toml", "--retrieval", "thorough", "--json"]
    status, out, _ = run(argv)
    assert status == 0 and json.loads(out)["applied"] == "thorough"
