"""The command line in process, for tests: `collective ARGS` through the console script's entry."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner


def run(args, input=None, env=None):
    """Run `collective ARGS`; return (exit code, stdout, stderr)."""
    from collective.cli import main

    runner = CliRunner(env=env)
    with runner.isolation(input=input) as streams:
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = streams[0].getvalue().decode(), streams[1].getvalue().decode()
    return code, out, err


def one_error_line(err):
    """The one `error: ...` line a failure writes to stderr (and never a traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


KEPT = ("COLLECTIVE_CACHE", "COLLECTIVE_KB_EXPANSION")
"""The suite's own settings that a clean environment keeps: the model cache, and no model
writing expansions at `kb add` (tests/conftest.py; a `kb add` of the eval KB expanded its 400
chunks with the 0.5B for half an hour inside one fixture)."""


@pytest.fixture
def clean_cwd(monkeypatch, tmp_path):
    """No `COLLECTIVE_*` settings from the environment, and a fresh working directory."""
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name not in KEPT:
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
