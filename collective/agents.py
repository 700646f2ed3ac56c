"""The council's node and agent names, in one table.

A node's name is also its agent name: the budget report's `node`, the usage log's `agent`,
the progress events' `node` and the `<name>_ms` timing. Roles (`planner`, `specialist`,
`reviewer`, `judge`, `chat`) select budget presets, answer caps and memory budget profiles;
`role_of` maps an agent to its role.
"""

from __future__ import annotations

__all__ = [
    "CHAT",
    "JUDGE",
    "NODES",
    "PLAN",
    "QUORUM",
    "REMEMBER",
    "RETRIEVE",
    "REVIEW",
    "ROLES",
    "SPECIALIST",
    "member",
    "member_index",
    "members",
    "reviewer",
    "role_of",
]

RETRIEVE = "retrieve"
PLAN = "plan"
SPECIALIST = "specialist"
QUORUM = "quorum"
REVIEW = "review"
JUDGE = "judge"
REMEMBER = "remember"
CHAT = "chat"
"""The agent of a `collective chat` turn (not a graph node)."""

NODES = (RETRIEVE, PLAN, SPECIALIST, QUORUM, REVIEW, JUDGE, REMEMBER)
"""The graph's nodes in the order a run passes them."""

ROLES = {
    PLAN: "planner",
    SPECIALIST: "specialist",
    REVIEW: "reviewer",
    JUDGE: "judge",
    CHAT: "chat",
}
"""Node (or agent family) -> role."""


def member(index: int) -> str:
    """The name of specialist `index` (0-based): `specialist-1`, `specialist-2`, ..."""
    return f"{SPECIALIST}-{index + 1}"


def members(k: int) -> list[str]:
    """The names of `k` specialists."""
    return [member(i) for i in range(k)]


def member_index(name: str) -> int:
    """The 0-based index of a specialist named by `member`."""
    return int(name.removeprefix(f"{SPECIALIST}-")) - 1


def reviewer(name: str) -> str:
    """The agent of `name`'s peer review: `review-specialist-1`."""
    return f"{REVIEW}-{name}"


def role_of(agent: str) -> str:
    """The role of an agent: `plan` -> `planner`, `specialist-2` -> `specialist`, ...

    An agent this table does not know is its own role.
    """
    family = agent.split("-", 1)[0]
    return ROLES.get(agent) or ROLES.get(family) or agent
