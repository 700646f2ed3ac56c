"""One table of node and agent names; the planner gets the planner's memory budget profile."""

from __future__ import annotations

import json

from collective import agents
from collective.graph import build_graph
from collective.memory.allowances import ProfileAssignments
from tests.unit.test_graph_council import context


def test_names_and_roles_come_from_one_table():
    assert agents.members(3) == ["specialist-1", "specialist-2", "specialist-3"]
    assert agents.member_index(agents.member(6)) == 6
    assert agents.reviewer("specialist-2") == "review-specialist-2"
    assert [agents.role_of(a) for a in ("plan", "specialist-4", "review-specialist-1")] == [
        "planner",
        "specialist",
        "reviewer",
    ]
    assert agents.role_of("judge") == "judge" and agents.role_of("someone") == "someone"


def test_the_plan_node_gets_the_planner_profile_not_the_default():
    """The profile table said `planner`, the node and usage log `plan`: the planner silently
    got `specialist-broad`."""
    assignments = ProfileAssignments.from_config({})
    assert assignments.profile_for("plan").name == "role-coordinator"
    assert assignments.profile_for("specialist-1").name == "specialist-broad"
    # A role name in config assigns every agent of the role; an agent's own entry wins.
    configured = ProfileAssignments.from_config(
        {"specialist": "specialist-narrow", "specialist-2": "role-architect"}
    )
    assert configured.profile_for("specialist-1").name == "specialist-narrow"
    assert configured.profile_for("specialist-2").name == "role-architect"


async def test_the_usage_log_names_the_planners_profile(tmp_path):
    log = tmp_path / "usage.jsonl"
    await build_graph().ainvoke(
        {"question": "Which filament for a hot car?"}, context=context(k=1, usage_log=str(log))
    )
    profiles = {r["agent"]: r["profile"] for r in map(json.loads, log.read_text().splitlines())}
    assert profiles == {
        "plan": "role-coordinator",
        "specialist-1": "specialist-broad",
        "judge": "role-architect",
    }
