"""A command line a person can trust (issue 15): errors that say what to do, `--json` always.

Everything runs through `collective.cli.main`, the console script's entry point; none of these
runs a model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.cli import one_error_line, run

pytestmark = pytest.mark.usefixtures("clean_cwd")


@pytest.mark.parametrize(
    ("args", "code", "expected"),
    [
        (["ask", "q", "--k", "0", "--json"], 2, "Invalid value for '--k'"),
        (["ask", "q", "--bogus", "--json"], 2, "No such option: --bogus"),
        (["ask", "q", "--json", "--k"], 2, "requires an argument"),
        (["ask", "", "--json"], 2, "the question is empty"),
        (["kb", "list", "--kb", "none.sqlite", "--json"], 2, "no knowledge base at none.sqlite"),
        (["recall", "q", "--kb", "none.sqlite", "--json"], 2, "no knowledge base at none.sqlite"),
        (["allowances", "report", "--since", "-1", "--json"], 2, "Invalid value for '--since'"),
    ],
)
def test_every_failure_with_json_prints_the_error_object(args, code, expected):
    status, out, err = run(args)
    assert status == code
    payload = json.loads(out)
    assert payload["error"]["exit_code"] == code
    assert expected in payload["error"]["message"]
    assert expected in one_error_line(err)


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["ask", "q", "--k"], "collective ask"),
        (["ask", "q", "--thread"], "collective ask"),
        (["kb", "list", "--kb"], "collective kb list"),
    ],
)
def test_a_missing_option_value_points_to_the_commands_help(args, command):
    status, _, err = run(args)
    assert status == 2
    assert f"(see `{command} --help`)" in one_error_line(err)


def test_flags_have_no_bool_metavar_in_help():
    status, out, _ = run(["ask", "--help"], env={"COLUMNS": "120"})
    assert status == 0
    assert "--json" in out and "--review" in out and "--checkpoints" in out
    assert "<bool>" not in out
    assert "<int range>" in out  # options that take a value still show its type


def test_a_corrupt_checkpoint_database_is_named_left_untouched_and_exits_2(tmp_path):
    db = tmp_path / ".collective" / "checkpoints.sqlite"
    db.parent.mkdir()
    db.write_bytes(b"this is not a sqlite database, just some bytes " * 100)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    status, out, err = run(["ask", "Which filament for a hot car?", "--json"])
    assert status == 2
    line = one_error_line(err)
    assert ".collective/checkpoints.sqlite is not a database" in line
    assert "move it aside" in line and "--checkpoints PATH" in line
    assert "internal error" not in line
    assert json.loads(out)["error"]["type"] == "ConfigError"
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before

    # --checkpoints PATH is the way out it names: that run gets past the broken file.
    status, _, err = run(["ask", "--thread", "none", "--checkpoints", "fresh.sqlite"])
    assert status == 2 and "thread none has no unfinished run" in one_error_line(err)
    assert (tmp_path / "fresh.sqlite").is_file()


def test_a_read_only_working_directory_is_named_and_exits_2(monkeypatch):
    readonly = Path("/sys")  # sysfs: not writable, even for root
    if os.access(readonly, os.W_OK) and not os.path.ismount(readonly):
        pytest.skip("no read-only directory to run in")
    try:
        (readonly / ".collective").mkdir()
    except OSError:
        pass
    else:
        (readonly / ".collective").rmdir()
        pytest.skip("/sys is writable here")
    monkeypatch.chdir(readonly)
    for args in (["ask", "Which filament?", "--json"], ["kb", "add", __file__, "--json"]):
        status, out, err = run(args)
        assert status == 2, err
        line = one_error_line(err)
        assert "internal error" not in line
        assert "cannot write .collective" in line and "writable directory" in line
        assert json.loads(out)["error"]["exit_code"] == 2


def test_resuming_an_unknown_thread_draws_no_council_table():
    status, out, err = run(["ask", "--thread", "nosuchthread"])
    assert status == 2
    assert "thread nosuchthread has no unfinished run" in one_error_line(err)
    assert "council" not in err and "waiting" not in err and out == ""


def test_kb_add_adds_every_good_file_and_lists_each_refused_one(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bad.txt").write_bytes(b"caf\xe9 au lait, not UTF-8\n")
    (docs / "nylon.txt").write_text("Nylon absorbs water; dry it before printing.\n", "utf-8")
    (docs / "tpu.md").write_text("# TPU\n\nTPU is flexible.\n", "utf-8")
    kb = str(tmp_path / "kb.sqlite")
    status, out, err = run(["kb", "add", str(docs), "--kb", kb])
    assert status == 1
    assert f"refused {docs / 'bad.txt'}: " in err and "not UTF-8" in err
    assert "2 files" in out and "1 refused" in out

    status, out, _ = run(["kb", "list", "--kb", kb, "--json"])
    sources = {Path(c["source"]).name for c in json.loads(out)["chunks"]}
    assert sources == {"nylon.txt", "tpu.md"}

    status, out, _ = run(["kb", "add", str(docs), "--kb", kb, "--json"])
    assert status == 1
    payload = json.loads(out)
    assert [Path(r["path"]).name for r in payload["refused"]] == ["bad.txt"]
    assert payload["unchanged_files"] == 2


def test_kb_list_shows_whole_ids_at_80_columns(tmp_path):
    deep = tmp_path / ("a-rather-long-folder-name-" * 4) / "notes"
    deep.mkdir(parents=True)
    (deep / "filament-drying-temperatures.md").write_text(
        "# Drying\n\n## PETG and PLA and nylon and TPU\nDry PETG at 65 °C.\n", "utf-8"
    )
    kb = str(tmp_path / "kb.sqlite")
    assert run(["kb", "add", str(deep), "--kb", kb])[0] == 0
    ids = [c["id"] for c in json.loads(run(["kb", "list", "--kb", kb, "--json"])[1])["chunks"]]
    status, out, _ = run(["kb", "list", "--kb", kb], env={"COLUMNS": "80"})
    assert status == 0 and ids
    for chunk_id in ids:
        assert chunk_id in out


def test_a_quorum_failure_without_failed_members_says_why():
    from collective.errors import QuorumError
    from collective.graph.context import CouncilContext
    from collective.nodes.quorum import check_quorum

    answered = {
        "member": "specialist-1",
        "model": "m",
        "text": "PETG.",
        "citations": [],
        "unknown_citations": [],
        "error": None,
    }
    with pytest.raises(QuorumError) as caught:
        check_quorum([answered], CouncilContext(k=3))
    assert "()" not in str(caught.value)
    assert "no specialist failed: 1 of 3 ran" in str(caught.value)


def test_config_show_prints_effective_values_and_how_they_were_derived(tmp_path):
    (tmp_path / "c.toml").write_text('[[specialists]]\nbackend = "embedded"\ncount = 5\n')
    status, out, _ = run(["config", "show", "--config", "c.toml", "--json"])
    assert status == 0
    data = json.loads(out)
    values, sources, notes = data["values"], data["sources"], data["notes"]
    assert values["k"] == 5 and sources["k"] == "default" and "specialist counts" in notes["k"]
    assert values["quorum"] == 3 and notes["quorum"] == "ceil(k/2)"
    assert values["chat"] == values["judge"] and "judge" in notes["chat"]
    assert values["kb"] == ".collective/kb.sqlite"
    assert values["budgets.judge"] == "judge" and values["output_caps.planner"] > 0
    assert None not in values.values()
    status, out, _ = run(["config", "show", "--config", "c.toml"], env={"COLUMNS": "160"})
    row = next(line for line in out.splitlines() if " quorum " in line)
    assert " 3 " in row and "ceil(k/2)" in row and "null" not in out


async def test_answers_cut_at_the_output_cap_are_flagged_in_json_and_terminal(capsys):
    from langgraph.checkpoint.memory import InMemorySaver

    from collective.commands.ask import print_result as _print_result
    from collective.config import CollectiveConfig
    from collective.graph import build_graph
    from collective.models.base import ChatResult
    from collective.session import CouncilSession, run_council
    from tests.fakes import ScriptedBackend
    from tests.unit.test_graph_council import context

    class CutJudge(ScriptedBackend):
        async def chat(self, messages, **kwargs) -> ChatResult:
            result = await super().chat(messages, **kwargs)
            return dataclasses.replace(result, finish_reason="length")

    session = CouncilSession(build_graph(InMemorySaver()), None, CollectiveConfig())
    ctx = context(judge=CutJudge("judge", "ASA, because [KB#mem_as"))
    result = await run_council(session, "Which filament for a hot car?", "t1", context=ctx)
    assert result["answer_cut"] is True and result["finish_reason"] == "length"
    assert [p["answer_cut"] for p in result["proposals"]] == [False, False, False]
    json_budgets = {b["node"]: b for b in result["budgets"]}
    assert json_budgets["judge"]["finish_reason"] == "length"
    _print_result(result, json_out=False, quiet=True)
    out = capsys.readouterr().out
    assert "✂ the verdict was cut at its output cap" in out and "output_caps.judge" in out
    assert "not finished is left out" in out and "mid-sentence" not in out  # judge.clean(cut=)
    _print_result(result, json_out=True, quiet=False)
    assert json.loads(capsys.readouterr().out)["answer_cut"] is True


async def test_the_plan_and_the_judge_have_a_time_limit():
    from langgraph.checkpoint.memory import InMemorySaver

    from collective.config import CollectiveConfig
    from collective.errors import BackendTimeout
    from collective.graph import build_graph
    from collective.session import CouncilSession, run_council
    from tests.fakes import ScriptedBackend
    from tests.unit.test_graph_council import context

    session = CouncilSession(build_graph(InMemorySaver()), None, CollectiveConfig())
    slow = ScriptedBackend("slow-planner", "Specialist 1: heat.", latency_s=30)
    for ctx, node in [
        (context(planner=slow, call_timeout_s=0.05), "plan"),
        (
            context(judge=ScriptedBackend("slow-judge", "ASA", latency_s=30), call_timeout_s=0.05),
            "judge",
        ),
    ]:
        with pytest.raises(BackendTimeout) as caught:
            await asyncio.wait_for(run_council(session, "PETG or ASA?", node, context=ctx), 25)
        assert f"{node} (slow-" in str(caught.value) and "within 0.05 s" in str(caught.value)
        assert "call_timeout_s" in str(caught.value)


def test_budget_report_recommendations_are_config_lines_the_user_can_apply(tmp_path):
    from collective.memory.allowances import DEFAULT_PROFILES, resolve_budget
    from collective.memory.usage import BudgetMonitor, UsageLog

    log = UsageLog(tmp_path / "usage.jsonl")
    narrow = resolve_budget(DEFAULT_PROFILES["specialist-narrow"], "", "medium")
    for over in [False] * 7 + [True] * 3:  # 3 of 10 calls over budget: upgrade
        monitor = BudgetMonitor("specialist-1", narrow)
        total = 22_000 if over else 12_000
        for scope, weight in narrow.profile.scope_weights.items():  # no drift: only the upgrade
            monitor.load(scope, round(total * weight))
        log.append(monitor.finish())
    status, out, _ = run(["allowances", "report", "--log", str(log.path)], env={"COLUMNS": "200"})
    assert status == 0
    assert "upgrade (specialist-narrow)" in out
    block = out[out.index("To apply") :]
    assert '[agent_profiles]\nspecialist-1 = "specialist-broad"' in block
    assert """COLLECTIVE_AGENT_PROFILES='{"specialist-1": "specialist-broad"}'""" in block

    # What it says to write is a valid config that assigns the profile.
    (tmp_path / "c.toml").write_text('[agent_profiles]\nspecialist-1 = "specialist-broad"\n')
    status, out, _ = run(["config", "show", "--config", str(tmp_path / "c.toml"), "--json"])
    assert json.loads(out)["values"]["agent_profiles.specialist-1"] == "specialist-broad"


def test_budget_report_scope_weights_become_a_profile_the_run_then_uses(tmp_path):
    from collective.config import load_config
    from collective.memory.allowances import DEFAULT_PROFILES, ProfileAssignments, resolve_budget
    from collective.memory.usage import BudgetMonitor, UsageLog

    log = UsageLog(tmp_path / "usage.jsonl")
    broad = resolve_budget(DEFAULT_PROFILES["specialist-broad"], "", "medium")
    for _ in range(8):  # global memory takes 80% of what it loads (weight 25%): drift
        monitor = BudgetMonitor("specialist-2", broad)
        monitor.load("global", 22_400)  # 28,000 of 35,000 loaded: no downgrade either
        monitor.load("agent_patterns", 5_600)
        log.append(monitor.finish())
    status, out, _ = run(["allowances", "report", "--log", str(log.path)], env={"COLUMNS": "240"})
    assert status == 0 and "adjust_scope_weights (specialist-broad)" in out
    assert "no config key" not in out
    block = out[out.index("To apply") :].split("\n", 1)[1].split("or for one shell")[0]
    assert 'specialist-2 = "specialist-2-weights"' in block
    assert "[allowance_profiles.specialist-2-weights]" in block

    # The block is a config that loads and gives specialist-2 the suggested weights.
    (tmp_path / "c.toml").write_text(block)
    config = load_config(tmp_path / "c.toml").config
    profile = ProfileAssignments.from_settings(config.council_context()).profile_for("specialist-2")
    assert profile.name == "specialist-2-weights" and profile.scope_weights["global"] == 0.8
    assert profile.base_budget == DEFAULT_PROFILES["specialist-broad"].base_budget
    assert resolve_budget(profile, "", "medium").scope_budgets["global"] == 28_000

    # The report run with that config knows the new profile's weights.
    status, out, _ = run(
        ["allowances", "report", "--log", str(log.path), "--config", str(tmp_path / "c.toml")],
        env={"COLUMNS": "240"},
    )
    assert status == 0


def test_a_profile_that_does_not_exist_is_refused_when_the_config_loads(tmp_path):
    (tmp_path / "c.toml").write_text('[agent_profiles]\nspecialist-1 = "specialist-wide"\n')
    status, out, err = run(["config", "show", "--config", str(tmp_path / "c.toml")])
    assert status == 2
    assert "specialist-wide" in err and "known profiles" in err and "Traceback" not in err
    (tmp_path / "c.toml").write_text(
        "[allowance_profiles.mine]\nbase_budget = 100\nmax_budget = 50\n"
        "scope_weights = { global = 1.0 }\n"
    )
    status, out, err = run(["config", "show", "--config", str(tmp_path / "c.toml")])
    assert status == 2 and "max_budget 50 is below base_budget 100" in err


async def test_members_cut_at_their_cap_are_told_in_one_line_and_no_planner_no_plan_row(capsys):
    """Members that stop at their cap (the default's 128 tokens) are named in one notice, and
    a council without a planner shows no plan row (before: a `plan done` row with nothing)."""
    import dataclasses

    from langgraph.checkpoint.memory import InMemorySaver

    from collective.commands.ask import print_result as _print_result
    from collective.config import CollectiveConfig
    from collective.graph import build_graph
    from collective.models.base import ChatResult
    from collective.session import CouncilSession, Watch, run_council
    from tests.fakes import ScriptedBackend
    from tests.unit.test_graph_council import context

    class CutMember(ScriptedBackend):
        async def chat(self, messages, **kwargs) -> ChatResult:
            result = await super().chat(messages, **kwargs)
            return dataclasses.replace(result, finish_reason="length")

    finished: list[str] = []
    watch = Watch(on_finished=lambda node, error: finished.append(node))
    session = CouncilSession(build_graph(InMemorySaver()), None, CollectiveConfig())
    ctx = context(planner=None, k=2, specialists=[CutMember("m", "ASA [KB#mem_asa]. It keeps")])
    result = await run_council(session, "Which filament?", "t1", context=ctx, watch=watch)
    assert "plan" not in finished and {"retrieve", "specialist-1", "judge"} <= set(finished)
    from rich.console import Console

    from collective.commands.render import ProgressView

    view = ProgressView(2, Console(), planned=ctx.planner is not None)
    assert list(view.rows) == ["retrieve", "specialist-1", "specialist-2", "judge"]
    _print_result(result, json_out=False, quiet=True)
    out = capsys.readouterr().out
    assert out.count("✂") == 1 and "specialist-1, specialist-2 were cut at their output cap" in out
