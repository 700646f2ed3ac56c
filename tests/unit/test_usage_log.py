import json
import multiprocessing
import threading
from datetime import UTC, datetime, timedelta

import pytest
import typer
from typer.testing import CliRunner

from collective.commands import budget as budget_command
from collective.memory.allowances import DEFAULT_PROFILES, resolve_budget
from collective.memory.usage import BudgetMonitor, UsageLog, UsageRecord, analyze


def make_record(agent, profile, loads, complexity="medium", when=None):
    """A record made the real way: a monitor that loads `loads` ({scope: tokens})."""
    monitor = BudgetMonitor(agent, resolve_budget(DEFAULT_PROFILES[profile], "", complexity))
    for scope, tokens in loads.items():
        monitor.load(scope, tokens)
    return monitor.finish(when)


def test_append_and_read_round_trip(tmp_path):
    log = UsageLog(tmp_path / "nested" / "usage.jsonl")
    assert log.read() == ([], 0)  # no file yet
    first = make_record("a", "specialist-narrow", {"global": 1_000})
    second = make_record("b", "role-architect", {"agent_recent": 90_000})
    log.append(first)
    log.append(second)
    records, corrupt = log.read()
    assert records == [first, second] and corrupt == 0
    line = json.loads(log.path.read_text().splitlines()[1])
    expected = {"timestamp", "agent", "profile", "complexity", "allocated", "loaded", "usage_pct"}
    assert expected | {"scopes", "exceeded", "warnings"} <= line.keys()
    assert line["exceeded"] is True


def test_corrupt_lines_are_skipped_and_counted(tmp_path):
    log = UsageLog(tmp_path / "usage.jsonl")
    good = make_record("a", "specialist-narrow", {"global": 1_000})
    log.append(good)
    with log.path.open("a") as handle:
        handle.write("not json at all\n")
        handle.write('{"agent": "a", "loaded": 3}\n')  # JSON, but not a usage record
        handle.write("\n")  # blank lines are not corruption
        handle.write(good.model_dump_json()[:40] + "\n")  # a torn line
        handle.write(good.model_dump_json().replace('"2', '"x', 1) + "\n")  # bad timestamp
    log.append(good)
    records, corrupt = log.read()
    assert records == [good, good]
    assert corrupt == 4


def test_since_days_keeps_recent_records(tmp_path):
    log = UsageLog(tmp_path / "usage.jsonl")
    now = datetime.now(UTC)
    for days in (40, 10, 1):
        log.append(
            make_record(f"d{days}", "specialist-narrow", {}, when=now - timedelta(days=days))
        )
    assert [r.agent for r in log.read(since_days=7)[0]] == ["d1"]
    assert [r.agent for r in log.read(since_days=30)[0]] == ["d10", "d1"]
    assert len(log.read()[0]) == 3


PROCESSES, THREADS, PER_THREAD, PAYLOAD = 4, 2, 400, 6_000


def _write_many(path, writer):
    """Runs in a child process: several threads append large records concurrently."""
    log = UsageLog(path)
    template = make_record("w", "specialist-narrow", {"global": 1})

    def run(thread):
        for seq in range(PER_THREAD):
            agent = f"{writer}-{thread}-{seq}"
            # Lines longer than PIPE_BUF (4,096) are where unlocked appends can tear.
            payload = f"{agent}:" + chr(ord("a") + writer) * PAYLOAD
            log.append(template.model_copy(update={"agent": agent, "warnings": [payload]}))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.mark.timeout(60)
def test_concurrent_processes_and_threads_never_tear_or_interleave_lines(tmp_path):
    path = tmp_path / "usage.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_write_many, args=(path, w)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=50)
        assert p.exitcode == 0
    raw = path.read_bytes().split(b"\n")
    assert raw[-1] == b""  # the file ends with a complete line
    lines = raw[:-1]
    assert len(lines) == PROCESSES * THREADS * PER_THREAD
    seen = set()
    for line in lines:
        record = UsageRecord.model_validate_json(line)  # every line is one whole record
        writer = int(record.agent.split("-")[0])
        assert record.warnings == [f"{record.agent}:" + chr(ord("a") + writer) * PAYLOAD]
        seen.add(record.agent)
    assert len(seen) == len(lines)
    assert UsageLog(path).read()[1] == 0


def calls(agent, profile, n, loads, complexity="medium"):
    return [make_record(agent, profile, loads, complexity) for _ in range(n)]


def test_analyze_recommends_an_upgrade_when_over_budget_too_often():
    # specialist-narrow medium = 20,000; 3 of 10 calls over (30% > 20%).
    records = calls("s1", "specialist-narrow", 7, {"global": 4_000, "agent_patterns": 12_000})
    records += calls("s1", "specialist-narrow", 3, {"global": 4_000, "agent_patterns": 22_000})
    report = analyze(records)
    (row,) = report.agents
    assert (row.calls, row.exceeded, row.exceedance_rate, row.bumped) == (10, 3, 0.3, 3)
    (rec,) = [r for r in report.recommendations if r.kind == "upgrade"]
    assert rec.suggested_profile == "specialist-broad"
    assert "3 of 10 calls (30% > 20%)" in rec.reason
    assert 0 < rec.confidence <= 1
    # the same pattern over more calls is more certain
    bigger = analyze(records * 4)
    (more,) = [r for r in bigger.recommendations if r.kind == "upgrade"]
    assert more.confidence > rec.confidence


def test_analyze_upgrade_at_the_largest_profile_says_raise_budgets():
    records = calls("judge", "role-architect", 6, {"global": 80_000})
    (rec,) = [r for r in analyze(records).recommendations if r.kind == "upgrade"]
    assert rec.suggested_profile is None and "no larger profile" in rec.reason


def test_analyze_recommends_a_downgrade_when_far_under():
    # role-coordinator medium = 50,000; 12,000 loaded is 24%, fits specialist-broad's 35,000.
    loads = {"global": 3_600, "agent_recent": 2_400, "agent_patterns": 6_000}
    report = analyze(calls("planner", "role-coordinator", 20, loads))
    (rec,) = report.recommendations
    assert rec.kind == "downgrade" and rec.suggested_profile == "specialist-broad"
    assert "mean usage 24.0% < 50%" in rec.reason and "20 of 20 calls" in rec.reason
    assert rec.confidence == 0.35  # 20/(20+10) x (1 - 24/50)


def test_no_downgrade_when_the_smaller_profile_would_overflow():
    # specialist-broad medium = 35,000; mean usage 28.6%, but 2 of 10 calls load 30,000,
    # more than specialist-narrow's 20,000: downgrading would exceed in 20% of calls.
    small = {"global": 1_250, "agent_recent": 1_250, "agent_patterns": 2_500}
    large = {"global": 7_500, "agent_recent": 7_500, "agent_patterns": 15_000}
    records = calls("s4", "specialist-broad", 8, small) + calls("s4", "specialist-broad", 2, large)
    report = analyze(records)
    assert report.agents[0].mean_usage_pct == pytest.approx(28.57, abs=0.01)
    assert report.agents[0].exceeded == 0
    assert report.recommendations == []
    # with only the small calls, the downgrade is recommended
    assert analyze(records[:8], min_calls=5).recommendations[0].kind == "downgrade"


def test_analyze_recommends_new_scope_weights_on_drift():
    # weights 0.25/0.25/0.5 but the agent loads 60% global.
    loads = {"global": 18_000, "agent_recent": 3_000, "agent_patterns": 9_000}
    report = analyze(calls("s2", "specialist-broad", 8, loads))
    (rec,) = [r for r in report.recommendations if r.kind == "adjust_scope_weights"]
    assert rec.suggested_weights == {"agent_patterns": 0.3, "agent_recent": 0.1, "global": 0.6}
    assert "global 60% vs weight 25%" in rec.reason
    assert report.agents[0].scope_shares["global"] == 0.6


def test_analyze_needs_min_calls_and_aggregates_per_profile():
    records = calls("s1", "specialist-narrow", 3, {"global": 30_000})
    records += calls("s3", "specialist-narrow", 2, {"global": 1_000})
    report = analyze(records, min_calls=5)
    assert report.recommendations == []
    (profile,) = report.profiles
    assert profile.agents == ["s1", "s3"] and profile.calls == 5
    assert profile.exceedance_rate == 0.6
    assert report.total_calls == 5


def cli():
    app = typer.Typer()
    app.add_typer(budget_command.app, name="allowances")
    return app


def test_cli_report_json(tmp_path):
    log = UsageLog(tmp_path / "usage.jsonl")
    for record in calls("s1", "specialist-narrow", 6, {"global": 25_000}):
        log.append(record)
    with log.path.open("a") as handle:
        handle.write("{torn\n")
    result = CliRunner().invoke(cli(), ["allowances", "report", "--json", "--log", str(log.path)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["total_calls"] == 6 and data["corrupt_lines"] == 1
    assert data["agents"][0]["exceedance_rate"] == 1.0
    assert data["recommendations"][0]["kind"] == "upgrade"


def test_cli_report_table_and_default_log(tmp_path, monkeypatch):
    path = tmp_path / "env.jsonl"
    monkeypatch.setenv("COLLECTIVE_USAGE_LOG", str(path))
    runner = CliRunner()
    empty = runner.invoke(cli(), ["allowances", "report"])
    assert empty.exit_code == 0 and "No usage recorded yet" in empty.output
    log = UsageLog(path)
    old = datetime.now(UTC) - timedelta(days=30)
    log.append(make_record("old-agent", "specialist-narrow", {"global": 1}, when=old))
    for record in calls("planner", "role-coordinator", 6, {"global": 60_000}):
        log.append(record)
    result = runner.invoke(cli(), ["allowances", "report", "--since", "7"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "6 model calls in the last 7 days" in result.output
    assert "planner" in result.output and "old-agent" not in result.output
    assert "upgrade" in result.output and "role-architect" in result.output
