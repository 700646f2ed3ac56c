import json
from datetime import UTC, datetime

import pytest

from collective.budget.report import BudgetReport, SectionUsage
from collective.memory.allowances import DEFAULT_PROFILES, resolve_budget
from collective.memory.usage import BudgetMonitor, UsageLog, record_model_call, scope_for_section


def narrow(complexity="medium"):
    return resolve_budget(DEFAULT_PROFILES["specialist-narrow"], "", override=complexity)


def test_events_fire_once_per_threshold_in_order():
    seen = []
    monitor = BudgetMonitor("specialist-1", narrow(), on_event=seen.append)  # 20,000 tokens
    assert monitor.load("global", 10_000) == []
    info = monitor.load("agent_recent", 5_000)  # 75.0% exactly
    assert [e.level for e in info] == ["info"]
    assert monitor.load("agent_recent", 100) == []  # no repeat at 75.5%
    warning = monitor.load("agent_patterns", 3_000)  # 90.5%
    assert [e.level for e in warning] == ["warning"]
    assert warning[0].scope == "agent_patterns" and warning[0].usage_pct == pytest.approx(90.5)
    assert monitor.load("agent_patterns", 1_900) == []  # 100.0% is not over budget
    error = monitor.load("agent_patterns", 1)
    assert [e.level for e in error] == ["error"]
    assert "bumped medium -> complex (budget 30000)" in error[0].message
    assert monitor.load("global", 500) == []  # still over: no spam
    assert [e.level for e in seen] == ["info", "warning", "error"]


def test_one_big_load_emits_every_crossed_threshold_and_bumps_as_far_as_needed():
    monitor = BudgetMonitor("judge", narrow("simple"))  # 10,000 tokens
    events = monitor.load("global", 25_000)
    assert [e.level for e in events] == ["info", "warning", "error"]
    # simple 10,000 -> medium 20,000 -> complex 30,000 holds 25,000
    assert monitor.agent_budget.complexity == "complex"
    assert monitor.agent_budget.budget == 30_000
    record = monitor.finish()
    assert record.exceeded and record.allocated == 10_000 and record.final_budget == 30_000
    assert record.complexity == "simple" and record.final_complexity == "complex"
    assert record.bumps == [
        "bumped simple -> medium: budget 10000 -> 20000",
        "bumped medium -> complex: budget 20000 -> 30000",
    ]
    assert record.usage_pct == 250.0


def test_overrun_past_the_bumped_budget_bumps_silently():
    monitor = BudgetMonitor("a", narrow())
    monitor.load("global", 21_000)  # error, bumped to complex (30,000)
    assert monitor.load("global", 10_000) == []  # 31,000: bumped again without a second error
    assert monitor.agent_budget.complexity == "multi-system"
    assert len(monitor.finish().bumps) == 2


def test_at_the_cap_the_refused_bump_is_recorded():
    monitor = BudgetMonitor("a", narrow("multi-system"))  # 40,000, top tier
    events = monitor.load("global", 45_000)
    assert "no bump: already at the cap" in events[-1].message
    record = monitor.finish()
    assert record.final_budget == 40_000
    assert record.bumps and record.bumps[0].startswith("no bump")


def test_finish_builds_the_record_once_and_closes_the_call():
    monitor = BudgetMonitor("specialist-2", narrow())
    monitor.load("agent_recent", 7_000)  # share is 6,000
    monitor.load("global", 11_500)  # 92.5%: info + warning
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    record = monitor.finish(when)
    assert record.timestamp == "2025-01-02T03:04:05+00:00"
    assert record.scopes == {"global": 11_500, "agent_recent": 7_000, "agent_patterns": 0}
    assert record.scope_budgets == {
        "global": 4_000,
        "agent_recent": 6_000,
        "agent_patterns": 10_000,
    }
    assert (record.loaded, record.usage_pct, record.exceeded) == (18_500, 92.5, False)
    assert any("reached 90%" in w for w in record.warnings)
    assert "scope agent_recent loaded 7000 of its 6000-token share" in record.warnings
    assert "scope global loaded 11500 of its 4000-token share" in record.warnings
    assert not any("75%" in w for w in record.warnings)  # info events are not warnings
    assert monitor.finish() is record
    with pytest.raises(RuntimeError, match="finished"):
        monitor.load("global", 1)
    with pytest.raises(ValueError, match=">= 0"):
        BudgetMonitor("x", narrow()).load("global", -1)


@pytest.mark.parametrize(
    ("section", "scope"),
    [
        ("conversation_summary", "agent_recent"),
        ("kb_chunks", "global"),
        ("evidence_aggregation", "global"),
        ("specialist_proposals", "agent_patterns"),
        ("system", "agent_patterns"),
        ("task_framing", "agent_patterns"),
        ("tools", "agent_patterns"),
        ("safety_margin", None),
    ],
)
def test_sections_map_onto_scopes(section, scope):
    assert scope_for_section(section) == scope


def test_record_model_call_monitors_a_budget_report_and_logs_it(tmp_path):
    report = BudgetReport(
        node="judge",
        model="gpt-oss:120b",
        n_ctx=131_072,
        prompt_tokens=90_000,
        max_output_tokens=8_000,
        token_counter="tiktoken:o200k_harmony",
        sections=[
            SectionUsage("system", 4_000, 3_000),
            SectionUsage("conversation_summary", 2_000, 1_800),
            SectionUsage("kb_chunks", 35_000, 34_000),
            SectionUsage("specialist_proposals", 25_000, 20_000),
            SectionUsage("evidence_aggregation", 15_000, 12_000),
            SectionUsage("task_framing", 2_000, 1_000),
            SectionUsage("safety_margin", 7_000, 0),
        ],
    )
    log = UsageLog(tmp_path / "logs" / "usage.jsonl")
    events = []
    budget = resolve_budget(DEFAULT_PROFILES["role-architect"], "", override="medium")
    record = record_model_call(log, "judge", budget, report, on_event=events.append)
    assert record.scopes == {"global": 46_000, "agent_recent": 1_800, "agent_patterns": 24_000}
    assert record.loaded == 71_800 and not record.exceeded  # 95.7% of 75,000
    assert [e.level for e in events] == ["info", "warning"]
    lines = log.path.read_text().splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["agent"] == "judge"
    assert record_model_call(None, "judge", budget, report).loaded == 71_800  # no log: no write
    assert len(log.path.read_text().splitlines()) == 1
