"""Errors a user meets: one line on stderr, a meaningful exit code, never a traceback.

Everything runs through `collective.cli.main`, the console script's entry point.
"""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import one_error_line, run

REPO = Path(__file__).resolve().parents[2]


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


pytestmark = pytest.mark.usefixtures("clean_cwd")


@pytest.mark.parametrize(
    ("args", "code", "expected"),
    [
        (["ask", ""], 2, "the question is empty"),
        (["ask", "   "], 2, "the question is empty"),
        (["ask"], 2, "no question"),
        (["ask", "q", "--retrieval", "fast"], 2, "retrieval: unknown profile 'fast'; use lean"),
        (["ask", "q", "--evidence", "wide"], 2, "Invalid value for '--evidence'"),
        (["ask", "q", "--k", "0"], 2, "Invalid value for '--k'"),
        (["ask", "q", "--bogus"], 2, "No such option: --bogus"),
        (["frobnicate"], 2, "No such command 'frobnicate'"),
        (["ask", "q", "--config", "missing.toml"], 2, "config file missing.toml does not exist"),
        (["ask", "q", "--kb", "nope.sqlite"], 2, "no knowledge base at nope.sqlite"),
        (["chat", "--kb", "nope.sqlite"], 2, "no knowledge base at nope.sqlite"),
        (["smoke", "--config", "missing.toml"], 2, "does not exist"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(args, code, expected):
    status, out, err = run(args)
    assert status == code
    assert expected in one_error_line(err)
    assert out == ""


def test_an_invalid_config_file_names_the_field_and_exits_2(tmp_path):
    (tmp_path / "bad.toml").write_text('k = 0\njudge = "olama:x"\n')
    status, _, err = run(["ask", "q", "--config", "bad.toml"])
    assert status == 2
    line = one_error_line(err)
    assert "k: Input should be greater than or equal to 1" in line
    assert "judge: invalid backend spec 'olama:x'" in line


def test_an_unreachable_server_exits_3_with_what_to_do(tmp_path):
    port = closed_port()
    (tmp_path / "c.toml").write_text(
        f'planner = "llama-server:http://127.0.0.1:{port}"\nk = 1\n'
        f'kb = "{tmp_path / "kb.sqlite"}"\n'
    )
    status, out, err = run(["ask", "Which filament for a hot car?", "--config", "c.toml", "-q"])
    assert status == 3
    line = one_error_line(err)
    assert f"127.0.0.1:{port}" in line and "llama-server" in line
    assert out == ""


def test_json_mode_keeps_stdout_one_json_object_on_errors(tmp_path):
    port = closed_port()
    (tmp_path / "c.toml").write_text(
        f'judge = "llama-server:http://127.0.0.1:{port}"\n'
        f'planner = "llama-server:http://127.0.0.1:{port}"\nk = 1\n'
    )
    status, out, err = run(["ask", "q", "--config", "c.toml", "--json"])
    assert status == 3
    payload = json.loads(out)
    assert payload["error"]["type"] == "BackendUnavailable"
    assert payload["error"]["exit_code"] == 3
    one_error_line(err)


def test_a_missing_llamacpp_model_file_is_a_config_error(tmp_path):
    (tmp_path / "c.toml").write_text(f'planner = "llamacpp:{tmp_path}/none.gguf"\nk = 1\n')
    status, _, err = run(["ask", "q", "--config", "c.toml", "-q"])
    assert status == 2
    assert "no GGUF file at" in one_error_line(err)


def test_resuming_a_thread_with_nothing_unfinished_says_so(tmp_path):
    status, _, err = run(["ask", "--thread", "never-used", "-q"])
    assert status == 2
    assert "thread never-used has no unfinished run to resume" in one_error_line(err)


def test_config_show_prints_values_with_their_sources(tmp_path, monkeypatch):
    (tmp_path / "c.toml").write_text("k = 2\n[output_caps]\njudge = 500\n")
    monkeypatch.setenv("COLLECTIVE_RETRIEVAL", "deep")
    status, out, _ = run(["config", "show", "--config", "c.toml", "--json"])
    assert status == 0
    data = json.loads(out)
    assert data["file"] == "c.toml"
    assert data["values"]["k"] == 2 and data["sources"]["k"] == "file"
    assert data["values"]["retrieval"] == "deep" and data["sources"]["retrieval"] == "env"
    assert data["sources"]["output_caps.judge"] == "file"
    assert data["sources"]["planner"] == "default"
    status, out, _ = run(["config", "show", "--config", "c.toml"])
    assert status == 0
    row = next(line for line in out.splitlines() if "retrieval" in line)
    assert "deep" in row and "env" in row


def test_the_other_commands_are_mounted():
    for args in (["kb", "--help"], ["recall", "--help"], ["allowances", "report", "--help"]):
        status, out, _ = run(args)
        assert status == 0 and "Usage" in out


def test_help_does_not_import_the_heavy_parts():
    code = (
        "import sys\n"
        "from collective.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('langgraph', 'llama_cpp', 'tiktoken', 'opentelemetry', 'httpx',"
        " 'pydantic_settings') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout
    assert "HEAVY []" in out


def test_a_council_mode_refuses_an_option_that_says_otherwise():
    """`--mode council-review` is the council with `--review`: `--no-review` contradicts it."""
    code, _, err = run(["ask", "Which filament?", "--mode", "council-review", "--no-review"])
    assert code == 2
    assert "--mode council-review sets review True; leave out --review" in one_error_line(err)
    code, _, err = run(["ask", "Which filament?", "--mode", "nonsense"])
    assert code == 2 and "council-split" in err  # every mode, from the one declaration
