"""Issue 55: one settings object a reader (and mypy) can see, its generated reference, and
retrieval profiles declared in a config file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collective.cli import app
from collective.config import CollectiveConfig, load_config
from collective.config_reference import PAGE, SECTIONS, render, sections
from collective.errors import ConfigError

runner = CliRunner()

ROOT = Path(__file__).resolve().parents[2]

SAMPLES = {
    "planner": "embedded",
    "chat": "embedded",
    "rewriter": "embedded",
    "summarizer": "embedded",
    "quorum": "1",
    "max_inject": "3",
    "max_latency_ms": "250",
    "kb": "mine.sqlite",
    "user_id": "ada",
    "confident_at": "-0.5",
    "agree_early": "2",
}
"""A value for each setting whose default is None (an unset variable)."""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name != "COLLECTIVE_CACHE":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_the_committed_reference_is_the_one_the_settings_generate():
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md drifted: run `python -m collective.config_reference`"
    )


def test_every_setting_has_a_description_a_default_a_variable_and_a_line_in_the_reference(
    monkeypatch,
):
    page = PAGE.read_text(encoding="utf-8")
    assert list(sections()) == list(SECTIONS.values()), "the settings open each section once"
    assert set(SECTIONS) <= set(CollectiveConfig.model_fields)
    defaults = CollectiveConfig().model_dump(mode="json")
    for name, field in CollectiveConfig.model_fields.items():
        assert field.description and len(field.description) > 20, name
        assert not field.is_required(), f"{name} has no default"
        variable = CollectiveConfig.env_var(name)
        assert f"| `{name}` | `{variable}` |" in page, name
        default = defaults[name]
        raw = SAMPLES.get(name) if default is None else default
        value = raw if isinstance(raw, str) else json.dumps(raw)
        monkeypatch.setenv(variable, value)
        effective = load_config(None, dotenv=None)
        assert effective.source_of(name) == "env", f"{variable} is not read"
        monkeypatch.delenv(variable)


def test_mypy_sees_each_settings_type(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from collective.config import CollectiveConfig\n"
        "c = CollectiveConfig()\n"
        "reveal_type(c.k)\nreveal_type(c.rerank)\nreveal_type(c.planner)\n"
        "reveal_type(c.retrieval_profiles)\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir",
         str(tmp_path / "cache"), str(probe)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600,
    )  # fmt: skip
    revealed = [
        line.split("Revealed type is ")[1].strip('"').replace("builtins.", "")
        for line in done.stdout.splitlines()
        if "Revealed type is" in line
    ]
    assert revealed == [
        "int",
        "Literal['engine'] | Literal['embedded'] | Literal['none']",
        "str | None",
        "dict[str, collective.kb.retrieval.ProfileSettings]",
    ], done.stdout


PROFILE = """
[retrieval_profiles.thorough]
base = "balanced"
fetch = 40
max_inject = 12
escalate_to = ""
"""


@pytest.fixture(scope="module")
def kb(tmp_path_factory) -> str:
    from collective.kb.demo import open_default_store

    path = tmp_path_factory.mktemp("kb") / "demo.sqlite"
    open_default_store(path).close()
    return str(path)


def test_a_profile_declared_in_a_config_file_is_taken_by_recall_and_reported(tmp_path, kb):
    config = tmp_path / "c.toml"
    config.write_text(PROFILE, encoding="utf-8")
    asked = runner.invoke(
        app,
        ["recall", "PETG drying", "--config", str(config), "--retrieval", "thorough", "--json"]
        + ["--kb", kb],
    )
    assert asked.exit_code == 0, asked.output
    data = json.loads(asked.stdout)
    assert (data["requested"], data["applied"]) == ("thorough", "thorough")
    assert data["reason"] == "thorough: requested explicitly"
    text = runner.invoke(
        app,
        ["recall", "PETG drying", "--config", str(config), "--retrieval", "thorough", "--kb", kb],
    )
    assert text.exit_code == 0 and "applied thorough" in text.stdout
    # The file's own `retrieval` is the default of recall, as it is of ask.
    config.write_text('retrieval = "thorough"\n' + PROFILE, encoding="utf-8")
    default = runner.invoke(
        app, ["recall", "PETG drying", "--config", str(config), "--json", "--kb", kb]
    )
    assert json.loads(default.stdout)["applied"] == "thorough"


def test_auto_chooses_a_declared_profile_in_place_of_its_own_choice(tmp_path, kb):
    config = tmp_path / "c.toml"
    config.write_text(PROFILE + '[retrieval_auto]\nlean = "thorough"\n', encoding="utf-8")
    short = runner.invoke(
        app, ["recall", "PETG drying", "--config", str(config), "--json", "--kb", kb]
    )
    assert short.exit_code == 0, short.output
    data = json.loads(short.stdout)
    assert (data["requested"], data["applied"]) == ("auto", "thorough")
    assert data["reason"].startswith("thorough in place of lean: ")


def test_a_declared_profile_is_accepted_by_ask_and_runs_in_the_council(tmp_path):
    from collective.graph import build_graph
    from tests.unit.test_graph_council import context

    config = tmp_path / "c.toml"
    config.write_text(PROFILE, encoding="utf-8")
    settings = load_config(config, {"retrieval": "thorough"}).config
    assert settings.council_context().retrieval == "thorough"
    ctx = context(retrieval=settings.retrieval)
    import asyncio

    out = asyncio.run(build_graph().ainvoke({"question": "PETG or ASA?"}, context=ctx))
    assert out["retrieval"]["applied"] == "thorough"
    refused = subprocess.run(
        [sys.executable, "-m", "collective.cli", "ask", "PETG?", "--config", str(config),
         "--retrieval", "fastest"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert "retrieval: unknown profile 'fastest'; use lean, balanced, deep, thorough, auto" in (
        refused.stderr
    )


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("[retrieval_profiles.deep]\nbase = 'lean'", "cannot be named 'deep'"),
        ("[retrieval_profiles.auto]\nbase = 'lean'", "cannot be named 'auto'"),
        ("[retrieval_profiles.x]\nbase = 'huge'", "base 'huge' is no built-in profile"),
        ("[retrieval_profiles.x]\nbase = 'lean'\nsteps = ['magic']", "unknown rewrite step"),
        ("[retrieval_profiles.x]\nbase = 'lean'\ncolour = 1", "colour"),
        ("[retrieval_profiles.x]\nfetch = 5", "missing 8 required"),
        ("[retrieval_auto]\ndeep = 'nowhere'", "retrieval_auto.deep: unknown profile 'nowhere'"),
        ("[retrieval_auto]\nhuge = 'lean'", "retrieval_auto.huge"),
    ],
)
def test_a_bad_declared_profile_is_one_clear_error(tmp_path, table, expected):
    config = tmp_path / "c.toml"
    config.write_text(table + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid config file") as caught:
        load_config(config)
    assert expected in str(caught.value)


def test_the_old_name_budget_profiles_is_taken_with_a_note(tmp_path, monkeypatch):
    config = tmp_path / "c.toml"
    weights = "{ global = 0.5, agent_recent = 0.25, agent_patterns = 0.25 }"
    table = f"base_budget = 1000\nmax_budget = 2000\nscope_weights = {weights}\n"
    config.write_text(f"[budget_profiles.mine]\n{table}", encoding="utf-8")
    with pytest.warns(FutureWarning, match="`budget_profiles` is now `allowance_profiles`"):
        settings = load_config(config).config
    assert settings.allowance_profiles["mine"]["base_budget"] == 1000
    assert "mine" in settings.council_context().memory_profiles.profiles
    config.write_text("", encoding="utf-8")
    weights_env = {"global": 1.0, "agent_recent": 0.0, "agent_patterns": 0.0}
    old = {"env": {"base_budget": 10, "max_budget": 20, "scope_weights": weights_env}}
    monkeypatch.setenv("COLLECTIVE_BUDGET_PROFILES", json.dumps(old))
    with pytest.warns(FutureWarning):
        assert "env" in load_config(config).config.allowance_profiles
    config.write_text(f"[budget_profiles.mine]\n{table}[allowance_profiles.mine]\n{table}")
    with warnings.catch_warnings(), pytest.raises(ConfigError, match="keep only allowance"):
        warnings.simplefilter("ignore")
        load_config(config)


def test_the_cli_shows_a_renamed_setting_as_one_note_line(tmp_path):
    (tmp_path / "collective.toml").write_text("[budget_profiles]\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "collective.cli", "config", "show"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("note: config file collective.toml: `budget_profiles` is now")
    assert "Warning" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_help_says_what_the_default_council_is():
    shown = runner.invoke(app, ["--help"])
    assert shown.exit_code == 0
    said = " ".join(shown.output.split())
    assert "no planner" in said and "two specialists" in said and "a planner, K" not in said
    settings = CollectiveConfig()
    assert settings.planner is None and settings.k == 2  # what the help says


def test_the_memory_allowance_report_has_its_name_and_the_old_one_says_so(tmp_path):
    new = runner.invoke(app, ["allowances", "report", "--json", "--log", str(tmp_path / "u.jsonl")])
    assert new.exit_code == 0 and json.loads(new.stdout)["total_calls"] == 0
    assert "note:" not in new.stderr
    old = runner.invoke(app, ["budget", "report", "--json", "--log", str(tmp_path / "u.jsonl")])
    assert old.exit_code == 0 and json.loads(old.stdout)["total_calls"] == 0
    assert "`collective budget` is now `collective allowances`" in old.stderr
    shown = " ".join(runner.invoke(app, ["--help"]).output.split())
    assert "allowances" in shown and " budget " not in shown
