"""Every command of the README's Usage section runs as written (issue 15).

The commands run in order through the console script's entry point, in a working directory
whose `collective.toml` (and `ops/collective.toml`, the path the smoke line names) puts every
role on one real llama-server with small explicit budgets, so the whole section takes a few
dozen small model calls. Only the elided question (`"..."`) is filled in.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collective.cli import main

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

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


def usage_commands() -> list[list[str]]:
    """The argv of each command in the Usage section's shell block (`&&` splits a line)."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Usage\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.S)
    assert block is not None, "the Usage section has no ```sh block"
    commands = []
    for line in block.group(1).splitlines():
        for part in line.split("&&"):
            argv = shlex.split(part, comments=True)
            if argv:
                commands.append(argv)
    return commands


def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    with CliRunner().isolation(input=stdin) as streams:
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        return code, streams[0].getvalue().decode(), streams[1].getvalue().decode()


def test_the_usage_section_lists_the_commands():
    names = [argv[1] for argv in usage_commands()]
    assert all(argv[0] == "collective" for argv in usage_commands())
    assert {"ask", "chat", "smoke", "config", "kb", "recall", "budget"} <= set(names)


@pytest.mark.timeout(1800)  # about twenty small model calls on a shared 2-core machine
def test_every_usage_command_runs(tmp_path, monkeypatch, llama_server):
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name != "COLLECTIVE_CACHE":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    url = f"llama-server:{llama_server.url}"
    config = (
        f'planner = "{url}"\njudge = "{url}"\nk = 1\njudge_tools = false\n'
        f'[[specialists]]\nbackend = "{url}"\ncount = 1\n' + SMALL_BUDGETS
    )
    (tmp_path / "collective.toml").write_text(config)
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "collective.toml").write_text(config)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "petg.md").write_text(
        "# PETG\n\n## Drying\nDry PETG at 65 °C for four hours before printing.\n"
    )
    for argv in usage_commands():
        args = ["Is PLA food safe?" if a == "..." else a for a in argv[1:]]
        started = time.monotonic()
        status, out, err = run(args, stdin="/exit\n" if args[0] == "chat" else None)
        print(f"{shlex.join(argv)}: exit {status} in {time.monotonic() - started:.0f} s")
        assert status == 0, f"{shlex.join(argv)} exited {status}: {err[-2000:]}"
        assert "Traceback" not in err
        if "--json" in args:
            payload = json.loads(out)
            assert payload["answer"] and len(payload["proposals"]) == int(
                args[args.index("--k") + 1]
            )
    # The commands really did their work: a conversation on thread car, the docs in the KB,
    # every model call in the usage log.
    status, out, _ = run(["kb", "list", "--json"])
    assert any(c["source"].endswith("petg.md") for c in json.loads(out)["chunks"])
    status, out, _ = run(["budget", "report", "--json"])
    agents = {a["agent"] for a in json.loads(out)["agents"]}
    assert {"plan", "judge", "specialist-5"} <= agents
