"""The agent's memory budget bounds the conversation memory it loads; reports name it."""

from __future__ import annotations

import re

from collective.budget.assembly import text_section
from collective.budget.plans import ModelBudget
from collective.budgeted_call import budgeted_call
from collective.graph.context import CouncilContext
from tests.fakes import ScriptedBackend

PLAN = ModelBudget(
    "specialist",
    32_768,
    24_000,
    1_000,
    {"system": 500, "conversation_summary": 8_000, "kb_chunks": 15_000, "task": 500},
)
MEMORY = "Earlier: the user prints PLA brackets for a greenhouse. " * 800  # about 10,000 tokens


async def ask(question: str, kb: str = ""):
    return await budgeted_call(
        CouncilContext(
            budgets={"specialist": PLAN}, agent_profiles={"specialist-1": "specialist-narrow"}
        ),
        role="specialist",
        agent="specialist-1",
        backend=ScriptedBackend(),
        contents=[
            text_section("system", "You are specialist-1."),
            text_section("conversation_summary", MEMORY, keep="end"),
            text_section("kb_chunks", kb),
            text_section("task", question),
        ],
        compose=lambda s: [{"role": "user", "content": "\n".join(s.values())}],
        question=question,
    )


async def test_the_conversation_memory_loaded_is_bounded_by_the_agent_recent_share():
    # specialist-narrow: 20,000 base x 0.5 for a simple question = 10,000; agent_recent 30%.
    call = await ask("What is PLA?")
    sections = {s.name: s for s in call.report.sections}
    assert sections["conversation_summary"].allocated == 3_000  # not the plan's 8,000
    assert sections["conversation_summary"].used <= 3_000
    assert any("memory budget: specialist-narrow @ simple" in n for n in call.report.notes)
    assert (call.report.memory_profile, call.report.memory_tier) == ("specialist-narrow", "simple")
    assert call.report_dict["memory_tier"] == "simple"


async def test_a_call_that_loads_past_its_budget_shows_the_tier_bump():
    call = await ask("What is PLA?", kb="PLA softens near 55 C. " * 1_500)  # about 10,500 tokens
    assert call.report.memory_tier == "simple -> medium"


def test_the_budget_table_names_the_profile_and_tier():
    from rich.console import Console

    from collective.budget.report import BudgetReport
    from collective.commands.render import budget_table

    report = BudgetReport(
        "plan",
        "m",
        8_192,
        900,
        100,
        "estimate",
        memory_profile="role-coordinator",
        memory_tier="simple -> medium",
    )
    console = Console(record=True, width=100)
    console.print(budget_table([report.to_dict()]))
    assert "role-coordinator (simple -> medium)" in console.export_text()


def test_the_budget_table_shows_the_shared_prefix_and_its_reuse():
    from rich.console import Console

    from collective.budget.report import BudgetReport
    from collective.commands.render import budget_table

    shared = BudgetReport("specialist-2", "m", 8_192, 939, 64, "exact", shared_tokens=852)
    reused = BudgetReport(
        "specialist-3", "m", 8_192, 939, 64, "x", shared_tokens=852, reused_tokens=855
    )
    console = Console(record=True, width=100)
    console.print(
        budget_table(
            [
                shared.to_dict(),
                reused.to_dict(),
                BudgetReport("judge", "m", 8_192, 900, 64, "exact").to_dict(),
            ]
        )
    )
    text = console.export_text()
    assert re.search(r"shared 852\s*\n.*reused 855", text)  # one a line: the column stays narrow
    assert text.count("shared 852") == 2 and text.count("reused") == 1
