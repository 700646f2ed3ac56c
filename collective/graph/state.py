"""State schemas of the council graph: a narrow input, the full internal state, the output."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, NotRequired

# pydantic builds the JSON schemas (`langgraph dev`, Studio) from these; on Python < 3.12 it
# needs typing_extensions' TypedDict.
from typing_extensions import TypedDict

from collective import agents

__all__ = [
    "CouncilInput",
    "CouncilOutput",
    "CouncilState",
    "Proposal",
    "ReviewTask",
    "SpecialistTask",
    "answered",
    "applied_profile",
    "review_task",
    "specialist_task",
]


def merge(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer: shallow-merge dict updates (timings from parallel nodes)."""
    return {**(left or {}), **(right or {})}


class Proposal(TypedDict):
    """One council member's answer (or why there is none)."""

    member: str
    """`specialist-1`, `specialist-2`, ..."""
    model: str
    text: str
    citations: list[str]
    """KB ids the member cited, first-appearance order, deduplicated."""
    unknown_citations: list[str]
    """Cited ids that were not among the chunks the member was shown."""
    error: str | None
    """Why the member produced nothing (failure or timeout); None when it answered."""
    stopped: NotRequired[bool]
    """True when early stop cancelled the member: the run had enough answers without it."""
    partial: NotRequired[bool]
    """True when the member ran out of time: `text` is what it had written by then."""
    finish_reason: NotRequired[str | None]
    """Why its answer ended (`length`: at its output cap, its unfinished sentence left out)."""
    confidence: NotRequired[dict[str, Any] | None]
    """How sure its model was of its tokens (`collective.models.confidence`); None where the
    backend cannot say, and then `confidence_note` says why."""
    confidence_note: NotRequired[str]
    evidence: NotRequired[dict[str, Any]]
    """What the member read (`collective.kb.evidence`): `mode` (shared or split), the shared
    `head` and its `own` slice (split), the chunks its prompt kept (`seen`), those it cut with
    their rendering as shown (`cut`) and the `reason`."""


class CouncilInput(TypedDict):
    """What a caller passes in: one question."""

    question: str
    """Checked at the edge by `collective.question.check_question` (the first node): empty or
    blank is refused, invalid Unicode repaired, an over-long question cut; every change is
    noted in the output's `notes`."""


class CouncilOutput(TypedDict, total=False):
    """What a run returns (the `--json` contract of docs/design.md)."""

    question: str
    answer: str
    citations: list[dict[str, str]]
    """`{id, source}` for every id the verdict cited that resolves to a supplied chunk."""
    unknown_citations: list[str]
    """Ids the verdict cited that were never supplied (never silently kept)."""
    proposals: list[Proposal]
    budgets: list[dict[str, Any]]
    """One budget report per model call."""
    retrieval: dict[str, Any]
    timings: dict[str, float]
    rankings: list[dict[str, Any]]
    """Peer-review rankings (`reviewer`, `order` of members best first, `reason`, `error`),
    when the review round ran."""
    ranking_aggregate: list[dict[str, Any]]
    """Mean rank per proposal (`member`, `mean_rank`, `votes`), best first."""
    tool_calls: list[dict[str, Any]]
    """The judge's verification tool calls."""
    evidence: dict[str, Any]
    """How the members read the chunks: `requested`, `applied` (shared or split), `reason`, and
    per member the chunks it saw."""
    citation_support: float | None
    """Share of the verdict's claims (uncited ones included) that a chunk they cite supports
    (None when it makes no claim)."""
    claims: list[dict[str, Any]]
    """The verdict's claims: `text`, `cited` ids, `status` (`supported`, `retagged`, `fixed`,
    `dropped`, `uncited`) and the `reason` (`collective.verdict.support`)."""
    claim_check: dict[str, Any]
    """The check of the verdict's claims: `claims`, the draft's support share
    (`draft_support`), whether the judge's fix was used (`revised`), the claims `dropped`, how
    many were `retagged`, and whose answer was `selected`."""
    confidence: dict[str, Any] | None
    """How sure the judge's model was of its own answer, the verdict's start
    (`collective.models.confidence`: `mean`, `lowest`, `tokens`, `window`); None where its
    backend cannot say, and then `confidence_note` says why."""
    confidence_note: str
    notes: list[str]


class CouncilState(CouncilOutput, total=False):
    """The whole internal state of one council run (and, on a thread, between runs)."""

    question: str
    chunks: list[dict[str, Any]]
    """The KB chunks retrieval injected (as `Chunk` dicts), best first."""
    conversation: str
    """The conversation so far, summarized from the memory tiers."""
    plan: str
    """The planner's deliberation strategy."""
    proposals: Annotated[list[Proposal], operator.add]
    budgets: Annotated[list[dict[str, Any]], operator.add]
    timings: Annotated[dict[str, float], merge]
    rankings: Annotated[list[dict[str, Any]], operator.add]
    own: dict[str, Any] | None
    """The judge's own answer to this question, checked (`nodes.judge.OwnAnswer.to_state`)."""
    memory: dict[str, Any]
    """The tiered memory (`TieredMemory.to_dict()`), carried between turns of a thread."""
    started_at: float
    race: str
    """The key of the run's early stop (`collective.nodes.early_stop`), with `agree_early`."""


class SpecialistTask(TypedDict):
    """What one specialist receives through `Send`."""

    member: str
    index: int
    question: str
    plan: str
    conversation: str
    chunks: list[dict[str, Any]]
    retrieval_profile: str
    samples: int
    """Members from `index` on that sample this one prompt alike: one request answers them all
    (`CouncilContext.samples_alike`)."""
    race: NotRequired[str]
    """The run's early stop (`collective.nodes.early_stop`): its members may be cancelled."""


class ReviewTask(TypedDict):
    """What one reviewer receives through `Send` in the peer-review round."""

    member: str
    index: int
    question: str
    conversation: str
    proposals: list[Proposal]
    """The proposals that answered (the reviewer's own is excluded when shown)."""


def answered(proposals: list[Proposal]) -> list[Proposal]:
    """The proposals of the members that answered (no `error`), in their order."""
    return [p for p in proposals if not p["error"]]


def applied_profile(state: Mapping[str, Any]) -> str:
    """The retrieval profile the run applied (`balanced` until retrieval has run)."""
    return str(state.get("retrieval", {}).get("applied", "balanced"))


def specialist_task(state: Mapping[str, Any], index: int, samples: int = 1) -> SpecialistTask:
    """What specialist `index` (0-based) is sent: the question, plan, conversation, chunks.

    `samples`: how many members from `index` on one request answers.
    """
    task = SpecialistTask(
        samples=samples,
        member=agents.member(index),
        index=index,
        question=state["question"],
        plan=state.get("plan", ""),
        conversation=state.get("conversation", ""),
        chunks=state.get("chunks", []),
        retrieval_profile=applied_profile(state),
    )
    if race := state.get("race"):
        task["race"] = race
    return task


def review_task(state: Mapping[str, Any], member: str, answered: list[Proposal]) -> ReviewTask:
    """What `member` is sent to rank the others among the `answered` proposals."""
    return ReviewTask(
        member=member,
        index=agents.member_index(member),
        question=state["question"],
        conversation=state.get("conversation", ""),
        proposals=answered,
    )
