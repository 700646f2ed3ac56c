"""The README and the guides cannot rot (issue 55): their graph, links, configs, commands and
worked examples are checked here; the commands run in tests/integration/test_readme_usage.py."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from collective.cli import app
from tests.docs_pages import (
    EVERY_PAGE,
    PAGES,
    REPO,
    anchors,
    blocks,
    commands,
    inline_commands,
    links,
    section,
)

README = REPO / "README.md"


def test_the_readme_is_short():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 260


def test_the_readme_has_no_dated_measurement():
    text = README.read_text(encoding="utf-8")
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not re.search(r"\b\d+(\.\d+)? ?(s|ms|min)\b(?! *\()", text.split("## Development")[0])


def test_the_readme_draws_the_graph_the_code_builds():
    from collective.graph import build_graph

    (drawn,) = blocks(README, "mermaid")
    assert drawn.strip() == build_graph().get_graph().draw_mermaid().strip()


def test_every_guide_is_linked_from_the_readme():
    linked = {t.split("#")[0] for t in links(README)}
    for page in EVERY_PAGE[1:]:
        assert f"docs/{page.name}" in linked, f"README links no {page.name}"


def test_every_link_resolves_to_a_file_and_a_heading():
    """Nothing may be missing: pages of other branches count once they are merged."""
    broken = []
    for page in EVERY_PAGE:
        for target in links(page):
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_every_toml_example_is_a_config_that_loads(tmp_path, monkeypatch):
    from collective.config import load_config

    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name != "COLLECTIVE_CACHE":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    count = 0
    for page in PAGES:
        for block in blocks(page, "toml"):
            path = tmp_path / f"example{count}.toml"
            path.write_text(block, encoding="utf-8")
            load_config(path, dotenv=None)  # raises ConfigError on an invalid example
            count += 1
    assert count >= 8


def test_every_make_target_shown_exists():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    shown = [argv for argv in commands() if argv[0] == "make"]
    assert shown and all(argv[1] in targets for argv in shown), shown


def test_every_collective_command_shown_parses():
    """Each command's subcommands and options exist (they run in the integration test)."""
    import typer

    root = typer.main.get_command(app)
    shown = [argv for argv in commands() if argv[0] == "collective"]
    assert len(shown) >= 12
    for argv in shown:
        command, args = root, argv[1:]
        while hasattr(command, "commands") and args and args[0] in command.commands:
            command, args = command.commands[args[0]], args[1:]
        assert not hasattr(command, "commands"), f"{argv}: no such command"
        command.make_context(argv[0], list(args), resilient_parsing=False)
    assert {"make", "collective"} >= {argv[0] for argv in commands()}, "only these run"


def run_example(code: str, tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLECTIVE_")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_retrieval_profile_example_runs(tmp_path):
    (code,) = re.findall(
        r"```python\n(.*?)```", section(REPO / "docs/extending.md", "A retrieval profile"), re.S
    )
    applied, reason, *_ = run_example(code, tmp_path).split()
    assert applied == "wide-lean"


def test_the_claim_rule_example_runs_and_the_rule_decides(tmp_path):
    (code,) = re.findall(
        r"```python\n(.*?)```", section(REPO / "docs/extending.md", "A claim rule"), re.S
    )
    without, with_rule = run_example(code, tmp_path).splitlines()
    assert without.startswith("dropped - negation differs")
    assert with_rule.startswith("supported - petg states it (by entailment)")


def _source_strings() -> str:
    """Every string collective writes, each on a line (f-strings' fields as `{}`)."""
    texts = []
    for path in (REPO / "collective").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                texts.append(
                    "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
                )
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append(node.value)
    return "\n".join(texts)


def test_every_error_the_troubleshooting_page_quotes_is_one_collective_writes():
    source = _source_strings()
    page = (REPO / "docs/troubleshooting.md").read_text(encoding="utf-8")
    quoted = re.findall(r"^- `([^`]+)`", page, re.M)
    assert len(quoted) >= 25
    missing = [
        q
        for q in quoted
        if not all(piece.strip() in source for piece in q.split("...") if piece.strip())
    ]
    assert missing == []


@pytest.mark.parametrize("name", ["ConfigError", "BackendUnavailable", "QuorumError"])
def test_the_troubleshooting_page_names_every_kind_of_error(name):
    from collective import errors

    page = (REPO / "docs/troubleshooting.md").read_text(encoding="utf-8")
    kinds = [
        n
        for n in errors.__all__
        if n.endswith(("Error", "Unavailable", "Timeout", "Overflow", "Exhausted", "Response"))
    ]
    assert name in kinds
    assert all(f"`{kind}`" in page for kind in kinds if kind != "BackendError"), kinds


def test_every_command_the_pages_name_in_their_text_exists():
    """`collective ...` and `make ...` named inline on any page, helper pages too: each
    command, option and make target exists (the fenced ones also run, above)."""
    import click
    import typer

    root = typer.main.get_command(app)
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    named = inline_commands()
    assert len(named) >= 30
    for argv in named:
        if argv[0] == "make":
            assert argv[1] in targets, f"{argv}: no such make target"
            continue
        command, args = root, argv[1:]
        while hasattr(command, "commands") and args and args[0] in command.commands:
            command, args = command.commands[args[0]], args[1:]
        group = hasattr(command, "commands")
        assert not (group and args and not args[0].startswith("-")), f"{argv}: no such command"
        if args and args[-1].startswith("--") and args[-1] != "--help":
            option = next(
                (p for p in command.params if args[-1] in (*p.opts, *p.secondary_opts)), None
            )
            assert option is not None, f"{argv}: no option {args[-1]}"
            if not getattr(option, "is_flag", False):
                args = [*args, "x"]  # "--mode" named alone: the option exists
        try:
            command.make_context(argv[0], list(args), resilient_parsing=True)
        except click.UsageError as exc:
            raise AssertionError(f"{argv}: {exc}") from None
