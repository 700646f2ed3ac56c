import pytest

from collective.budget.plans import (
    JUDGE_PRESET,
    SAFETY_MARGIN,
    SPECIALIST_PRESET,
    ModelBudget,
)
from collective.errors import BudgetError


def test_presets_are_designs_exactly():
    assert SPECIALIST_PRESET.n_ctx == 32_768
    assert SPECIALIST_PRESET.prompt_budget == 24_000
    assert dict(SPECIALIST_PRESET.sections) == {
        "system": 4_000,
        "conversation_summary": 2_000,
        "kb_chunks": 10_000,
        "task": 2_000,
        "tools": 4_000,
        SAFETY_MARGIN: 2_000,
    }
    assert JUDGE_PRESET.n_ctx == 131_072
    assert JUDGE_PRESET.prompt_budget == 100_000
    assert dict(JUDGE_PRESET.sections) == {
        "system": 4_000,
        "conversation_summary": 2_000,
        "kb_chunks": 35_000,
        "proposals": 25_000,
        "evidence": 15_000,
        "task": 2_000,
        "tools": 10_000,
        SAFETY_MARGIN: 7_000,
    }
    for preset in (SPECIALIST_PRESET, JUDGE_PRESET):
        assert 6_000 <= preset.output_budget <= 8_000
        assert sum(preset.sections.values()) == preset.prompt_budget


def test_scaled_to_a_small_slot_is_proportional_and_says_why():
    plan = SPECIALIST_PRESET.fit_to_context(4_096, "llama-server /props n_ctx")
    assert plan.n_ctx == 4_096
    assert plan.prompt_budget + plan.output_budget <= 4_096
    assert plan.sections["kb_chunks"] == 1_250
    assert plan.sections["system"] == 500
    assert "32,768" in plan.scaled and "4,096" in plan.scaled and "/props" in plan.scaled


def test_a_plan_that_fits_is_not_scaled():
    plan = JUDGE_PRESET.fit_to_context(200_000)
    assert plan.n_ctx == 200_000 and plan.scaled == ""
    assert plan.sections == JUDGE_PRESET.sections
    assert plan.output_budget == JUDGE_PRESET.output_budget


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        (dict(n_ctx=100, prompt_budget=50, output_budget=10, sections={"kb": -1}), "'kb'"),
        (dict(n_ctx=100, prompt_budget=50, output_budget=100, sections={}), "output_budget"),
        (dict(n_ctx=100, prompt_budget=95, output_budget=10, sections={}), "exceed n_ctx"),
        (
            dict(n_ctx=100, prompt_budget=50, output_budget=10, sections={"a": 30, "b": 30}),
            "'b'",
        ),
    ],
)
def test_invalid_plans_are_refused_naming_the_offender(kwargs, needle):
    with pytest.raises(BudgetError, match=needle):
        ModelBudget(name="bad", **kwargs)


def test_resize_shrinks_and_grows_within_the_prompt_budget():
    lean = SPECIALIST_PRESET.resize("kb_chunks", 0.5)
    assert lean.sections["kb_chunks"] == 5_000
    assert lean.unallocated == 5_000
    deep = SPECIALIST_PRESET.resize("kb_chunks", 1.5)
    assert deep.sections["kb_chunks"] == 14_000  # all the tools allocation, no more
    assert deep.sections["tools"] == 0
    assert sum(deep.sections.values()) == deep.prompt_budget
