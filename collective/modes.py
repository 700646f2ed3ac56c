"""Ways to answer one question from the same retrieval with the same prompts and nodes.

* `single`: the best model (the judge's), one call, answering as a specialist;
* `self-consistency`: K+1 samples of the best model (member temperatures), and the sample that
  agrees most with the others (word overlap; no extra call);
* `self-moa`: K samples of the best model, then the judge (Self-MoA, "Rethinking
  Mixture-of-Agents", 2025);
* `council`: the configured specialists (across models), then the judge;
* `council-review`: the council with the anonymous peer-review round before the judge.

Every mode runs the council's own nodes (`retrieve`, `specialist`, `review`, `judge`), outside
the graph, so the prompts, budgets and citation checks are the council's. The judge runs
without KB tools here, so that modes compare at equal model calls (K+1 for all but `single`
and `council-review`). `bench/council_eval.py` measures them; `collective ask --mode` runs them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from typing import Any, Literal

from langgraph.runtime import Runtime

from collective.graph.context import CouncilContext
from collective.graph.state import Proposal, review_task, specialist_task
from collective.models.base import Backend
from collective.nodes.judge import judge
from collective.nodes.model_call import resolve_backend
from collective.nodes.retrieve import retrieve
from collective.nodes.review import review
from collective.nodes.specialist import specialist

__all__ = ["MODES", "Mode", "ModeResult", "run_mode"]

Mode = Literal["single", "self-consistency", "self-moa", "council", "council-review"]
MODES: tuple[Mode, ...] = ("single", "self-consistency", "self-moa", "council", "council-review")


@dataclasses.dataclass
class ModeResult:
    """One mode's answer to one question, with what it cost."""

    mode: str
    answer: str
    citations: list[dict[str, str]]
    """Cited chunks that were supplied (`id`, `source`), first-appearance order."""
    unknown_citations: list[str]
    supplied: list[str]
    """Ids of the chunks retrieval supplied."""
    proposals: list[Proposal]
    calls: int
    prompt_tokens: int
    output_tokens: int
    wall_s: float


def _overlap(a: str, b: str) -> float:
    wa, wb = set(re.findall(r"\w+", a.lower())), set(re.findall(r"\w+", b.lower()))
    return len(wa & wb) / len(wa | wb) if wa and wb else 0.0


def most_consistent(proposals: list[Proposal]) -> Proposal:
    """The answer that agrees most with the others (mean word-set Jaccard), first on ties."""
    answered = [p for p in proposals if p["text"]] or proposals
    return max(
        answered,
        key=lambda p: sum(_overlap(p["text"], q["text"]) for q in answered if q is not p),
    )


async def _members(
    ctx: CouncilContext, question: str, retrieved: dict[str, Any], count: int
) -> tuple[list[Proposal], list[dict[str, Any]]]:
    """`count` specialists (backends cycled, member temperatures), one after the other."""
    proposals: list[Proposal] = []
    budgets: list[dict[str, Any]] = []
    state = {**retrieved, "question": question, "conversation": ""}  # no plan, no memory
    for index in range(count):
        out = await specialist(specialist_task(state, index), Runtime(context=ctx))
        proposals += out["proposals"]
        budgets += out.get("budgets", [])
    return proposals, budgets


async def run_mode(question: str, mode: Mode, ctx: CouncilContext) -> ModeResult:
    """Answer `question` in `mode` under `ctx` (its judge is the best model; k is K).

    Raises:
        BackendError: A model failed where the mode cannot go on without it (the judge).
    """
    started = time.perf_counter()
    base = dataclasses.replace(ctx, judge_tools=False, review=False)
    retrieved = await retrieve({"question": question}, Runtime(context=base))
    question = retrieved["question"]
    top = ctx.judge if isinstance(ctx.judge, str | Backend) else ctx.judge[0]  # the best model
    best = dataclasses.replace(base, specialists=(top,))
    budgets: list[dict[str, Any]] = []
    texts: list[str] = []
    if mode in ("single", "self-consistency"):
        count = 1 if mode == "single" else ctx.k + 1
        proposals, budgets = await _members(best, question, retrieved, count)
        chosen = most_consistent(proposals)
        answer, cited = chosen["text"], chosen["citations"]
        unknown = chosen["unknown_citations"]
        texts = [p["text"] for p in proposals]
    else:
        members = best if mode == "self-moa" else base
        proposals, budgets = await _members(members, question, retrieved, ctx.k)
        texts = [p["text"] for p in proposals]
        rankings: list[dict[str, Any]] = []
        if mode == "council-review":
            answered = [p for p in proposals if p["error"] is None]
            for proposal in answered:
                task = review_task({"question": question}, proposal["member"], answered)
                out = await review(task, Runtime(context=members))
                rankings += out["rankings"]
                budgets += out.get("budgets", [])
        state = {**retrieved, "plan": "", "proposals": proposals, "rankings": rankings}
        verdict = await judge(state, Runtime(context=members))  # type: ignore[arg-type]
        budgets += verdict.get("budgets", [])
        answer = verdict["answer"]
        cited = [c["id"] for c in verdict["citations"]]
        unknown = list(verdict["unknown_citations"])
        texts.append(answer)
    sources = {c["id"]: c.get("source", "") for c in retrieved["chunks"]}
    supplied = list(sources)
    counter = await resolve_backend(top).token_counter()
    output = sum(await asyncio.to_thread(lambda: [counter.count(t) for t in texts]))
    return ModeResult(
        mode=mode,
        answer=answer,
        citations=[{"id": i, "source": sources.get(i, "")} for i in dict.fromkeys(cited)],
        unknown_citations=list(unknown),
        supplied=supplied,
        proposals=proposals,
        calls=len(budgets),
        prompt_tokens=sum(b["prompt_tokens"] for b in budgets),
        output_tokens=output,
        wall_s=time.perf_counter() - started,
    )
