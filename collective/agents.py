"""The council's node, agent and answer-mode names, in one table.

A node's name is also its agent name: the budget report's `node`, the usage log's `agent`,
the progress events' `node` and the `<name>_ms` timing. Roles (`planner`, `specialist`,
`reviewer`, `judge`, `chat`) select budget presets, answer caps and memory budget profiles;
`role_of` maps an agent to its role.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "CHAT",
    "DRAFT",
    "GRAPH_MODES",
    "JUDGE",
    "MODES",
    "NODES",
    "OWN_ROW",
    "Mode",
    "PLAN",
    "QUORUM",
    "REMEMBER",
    "RETRIEVE",
    "REVIEW",
    "ROLES",
    "SPECIALIST",
    "live_rows",
    "member",
    "member_index",
    "members",
    "reviewer",
    "role_of",
]

RETRIEVE = "retrieve"
PLAN = "plan"
SPECIALIST = "specialist"
DRAFT = "draft"
"""The judge's own answer, written beside the specialists (its calls report as `judge`)."""
QUORUM = "quorum"
REVIEW = "review"
JUDGE = "judge"
REMEMBER = "remember"
CHAT = "chat"
"""The agent of a `collective chat` turn (not a graph node)."""

NODES = (RETRIEVE, PLAN, SPECIALIST, DRAFT, QUORUM, REVIEW, JUDGE, REMEMBER)
"""The graph's nodes in the order a run passes them."""

OWN_ROW = (RETRIEVE, PLAN, JUDGE)
"""Nodes with their own row in the live view (specialists have one per member)."""


class Mode(StrEnum):
    """Ways to answer one question (`collective.modes` runs them, `ask --mode` names them).

    `council` is the configured specialists, then the judge; `council-review` adds the peer
    review round and `council-split` splits the evidence. The others sample the judge's model;
    `adaptive` only where its own answer is unsure (`collective.models.confidence`); `vote`
    weighs self-consistency's candidates by their model's confidence; `select` has the model pick
    the most consistent of them.
    """

    single = "single"
    self_consistency = "self-consistency"
    self_moa = "self-moa"
    council = "council"
    council_review = "council-review"
    council_split = "council-split"
    adaptive = "adaptive"
    vote = "vote"
    select = "select"


MODES: tuple[Mode, ...] = tuple(Mode)
"""Every answer mode."""

GRAPH_MODES: dict[Mode, dict[str, object]] = {
    Mode.council: {},
    Mode.council_review: {"review": True},
    Mode.council_split: {"evidence": "split"},
}
"""Modes that run as the whole council graph (planner, memory, thread), with the settings each
means; the others (`collective.modes`) sample the judge's model without a thread."""

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


def live_rows(k: int, planned: bool = True) -> list[str]:
    """The live view's rows for a council of `k`, in the order a run reaches them.

    `planned`: a planner plans (else no `plan` row).
    """
    return [RETRIEVE, *([PLAN] if planned else []), *members(k), JUDGE]


def reviewer(name: str) -> str:
    """The agent of `name`'s peer review: `review-specialist-1`."""
    return f"{REVIEW}-{name}"


def role_of(agent: str) -> str:
    """The role of an agent: `plan` -> `planner`, `specialist-2` -> `specialist`, ...

    An agent this table does not know is its own role.
    """
    family = agent.split("-", 1)[0]
    return ROLES.get(agent) or ROLES.get(family) or agent
