"""Ways to answer one question from the same retrieval with the same prompts and nodes.

* `single`: the best model (the judge's), one call, answering as a specialist;
* `self-consistency`: K+1 samples of the best model (member temperatures), and the sample that
  agrees most with the others (word overlap; no extra call);
* `self-moa`: K samples of the best model, then the judge (Self-MoA, "Rethinking
  Mixture-of-Agents", 2025);
* `council`: the configured specialists (across models), then the judge;
* `council-review`: the council with the anonymous peer-review round before the judge;
* `council-split`: the council with split evidence (each member reads the shared head and its
  own slice of the candidates, `collective.kb.evidence`).

The council modes read the chunks as `ctx.evidence` says (`council-split` always splits); the
modes that sample the best model give every sample the same chunks (shared evidence).

Every mode runs a small graph of the council's own nodes (`graph.builder.build_answer_graph`:
`retrieve`, N `specialist`s, then `quorum`, `review` and `judge` where the mode has a judge),
without planner and memory, so the prompts, budgets and citation checks are the council's. The
judge runs without KB tools here, so that modes compare at equal model calls (K+1 for all but
`single` and `council-review`). `bench/council_eval.py` measures them; `collective ask --mode`
runs them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from typing import Any

from collective.agents import MODES, Mode
from collective.graph.builder import build_answer_graph
from collective.graph.context import CouncilContext, open_knowledge
from collective.graph.state import Proposal
from collective.kb.citations import split_citations
from collective.kb.evidence import council_evidence
from collective.kb.support import check_claims, shown_chunks, support_share
from collective.models.refs import resolve_backend
from collective.prompts import specialist
from collective.prompts.judge import clean

__all__ = ["MODES", "Mode", "ModeResult", "run_mode"]


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
    seen: list[str]
    """Ids of the chunks some model's prompt really showed (kept after trimming)."""
    evidence: dict[str, Any]
    """How the members read the chunks (`collective.kb.evidence.council_evidence`)."""
    citation_support: float | None
    """Share of the answer's cited claims whose chunks state their numbers and names."""
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


def mode_context(ctx: CouncilContext, mode: Mode) -> tuple[CouncilContext, int, bool]:
    """The settings a mode runs under, how many specialists answer, and whether a judge rules.

    The judge's (first) backend is the best model: `single`, `self-consistency` and `self-moa`
    sample it as every specialist. No judge tools; peer review only in `council-review`.
    """
    reading = "split" if mode == Mode.council_split else ctx.evidence
    if mode not in (Mode.council, Mode.council_review, Mode.council_split):
        reading = "shared"  # samples of one model: the same chunks each
    base = dataclasses.replace(
        ctx, judge_tools=False, review=mode == Mode.council_review, evidence=reading
    )
    best = dataclasses.replace(base, specialists=(ctx.judges[0],))
    if mode in (Mode.single, Mode.self_consistency):
        return best, 1 if mode == Mode.single else ctx.k + 1, False
    return best if mode == Mode.self_moa else base, ctx.k, True


async def run_mode(question: str, mode: Mode, ctx: CouncilContext) -> ModeResult:
    """Answer `question` in `mode` under `ctx` (its judge is the best model; k is K).

    Raises:
        BackendError: A model failed where the mode cannot go on without it (the judge).
        QuorumError: Too few specialists answered for the judge to rule.
    """
    started = time.perf_counter()
    mode = Mode(mode)  # a plain string from a script: its member, or ValueError
    settings, members, judged = mode_context(ctx, mode)
    graph = build_answer_graph(members, judge=judged, name=f"collective-{mode}")
    out = await graph.ainvoke({"question": question}, context=settings)
    proposals: list[Proposal] = out["proposals"]
    texts = [p["text"] for p in proposals]
    if judged:
        answer, unknown = out["answer"], list(out["unknown_citations"])
        cited = [c["id"] for c in out["citations"]]
        support, evidence = out["citation_support"], out["evidence"]
        texts.append(answer)
    else:
        chosen = most_consistent(proposals)
        store = open_knowledge(settings)
        seen_by = (chosen.get("evidence") or {}).get("seen", [])
        supplied = {i: c for i in seen_by if (c := store.get(i)) is not None}
        answer = clean(chosen["text"], [specialist.ANSWER])
        cited, unknown = split_citations(answer, list(supplied))
        support = support_share(check_claims(answer, shown_chunks(supplied)))
        evidence = council_evidence(settings.evidence, proposals)
    sources = {c["id"]: c.get("source", "") for c in out["retrieval"]["chunks"]}
    counter = await resolve_backend(ctx.judges[0]).token_counter()
    output = sum(await asyncio.to_thread(lambda: [counter.count(t) for t in texts]))
    return ModeResult(
        mode=mode,
        answer=answer,
        citations=[{"id": i, "source": sources.get(i, "")} for i in dict.fromkeys(cited)],
        unknown_citations=list(unknown),
        supplied=list(sources),
        seen=list(
            dict.fromkeys(i for p in proposals for i in (p.get("evidence") or {}).get("seen", []))
        ),
        evidence=evidence,
        citation_support=support,
        proposals=proposals,
        calls=len(out["budgets"]),
        prompt_tokens=sum(b["prompt_tokens"] for b in out["budgets"]),
        output_tokens=output,
        wall_s=time.perf_counter() - started,
    )
