"""Ways to answer one question from the same retrieval with the same prompts and nodes.

* `single`: the judge alone: its own answer from the KB, one call of the best model (the
  judge's), checked (a fix call where a claim fails);
* `self-consistency`: that answer and K-1 samples of the best model (member temperatures), and
  the one that agrees most with the others (word overlap; no extra call);
* `self-moa`: the judge's answer weighed against K-1 samples of the best model (Self-MoA,
  "Rethinking Mixture-of-Agents", 2025);
* `council`: the judge's answer weighed against the configured specialists' (across models);
* `council-review`: the council with the anonymous peer-review round before the judge;
* `council-split`: the council with split evidence (each member reads the shared head and its
  own slice of the candidates, `collective.kb.evidence`);
* `adaptive`: the judge's own answer first; where its model was sure of it
  (`collective.models.confidence.is_confident` at `confident_at`) it is the answer, one call;
  else `self-moa`'s samples are drawn after it and the judge weighs them (docs/adaptive.md);
* `vote`: `self-consistency`'s K answers, voted on in their reduced form (the thing each first
  line answers with), each vote weighed by its model's confidence (CISC, arXiv 2502.06233);
* `select`: `self-consistency`'s K answers shown to the best model, which names the one the
  others agree with most (universal self-consistency), checked by the claim check like any.

The council modes read the chunks as `ctx.evidence` says (`council-split` always splits); the
modes that sample the best model give every sample the same chunks (shared evidence).

Every mode runs a small graph of the council's own nodes (`graph.builder.build_answer_graph`:
`retrieve`, N `specialist`s, then `quorum`, `review` and `judge` where the mode has a judge),
without planner and memory, so the prompts, budgets and citation checks are the council's. The
judge runs without KB tools here. `run_arms` answers in several modes at once, each shared call
made once (one retrieval; the judge's own answer, which every mode starts from; the best
model's samples; council members that read alike): what `collective eval` measures.
`collective ask --mode` runs one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from collective import agents
from collective.agents import MODES, Mode
from collective.budget.assembly import labelled_section, text_section
from collective.budgeted_call import budgeted_call
from collective.errors import BackendError, BudgetError
from collective.graph.builder import build_answer_graph
from collective.graph.context import CouncilContext, open_knowledge
from collective.graph.state import Proposal
from collective.kb.citations import neutralise, split_citations
from collective.kb.evidence import council_evidence
from collective.models.confidence import DEFAULT_CONFIDENT_AT, confidence_fields, is_confident
from collective.models.refs import resolve_backend
from collective.prompts import review as review_prompt
from collective.prompts import select as select_prompt
from collective.prompts import specialist
from collective.prompts.judge import clean
from collective.verdict.agreement import reduced_answer
from collective.verdict.support import check_claims, shown_whole, support_share

__all__ = ["MODES", "ArmsRun", "Mode", "ModeResult", "confident_vote", "run_arms", "run_mode"]


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
    confidence: dict[str, Any] = dataclasses.field(default_factory=dict)
    """How sure the model was of the answer given (`confidence_fields`): the judge's own answer
    where it rules, the chosen sample's in `self-consistency`."""
    stages: dict[str, float] = dataclasses.field(default_factory=dict)
    """Wall seconds of each stage the mode read (`retrieval`, `own`, `members`, `verdict`)."""
    escalated: bool | None = None
    """`adaptive`: whether the samples were drawn (None in the other modes)."""


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


def confident_vote(proposals: list[Proposal], things: Mapping[str, str | None]) -> Proposal:
    """The answer of the thing the confidence-weighted vote elects (CISC), first on ties.

    Each answer votes for the thing it answers with (`things`: member -> its reduced form; None
    votes for itself alone) with weight e^mean, its tokens' geometric mean probability; where
    any answer has no confidence, every weight is 1 (a plain vote). Of the elected thing's
    answers, the surest stands.

    Args:
        proposals: The candidates, in order.
        things: Each candidate's reduced answer by member.
    """
    answered = [p for p in proposals if p["text"]] or proposals
    means = [(p.get("confidence") or {}).get("mean") for p in answered]
    weights = [math.exp(m) if None not in means else 1.0 for m in means]  # type: ignore[arg-type]
    totals: dict[str, float] = {}
    for p, weight in zip(answered, weights, strict=True):
        key = things.get(p["member"]) or f"\0{p['member']}"
        totals[key] = totals.get(key, 0.0) + weight
    elected = max(totals, key=lambda key: totals[key])  # first elected on ties
    backers = [
        (weight, -i, p)
        for i, (p, weight) in enumerate(zip(answered, weights, strict=True))
        if (things.get(p["member"]) or f"\0{p['member']}") == elected
    ]
    return max(backers, key=lambda b: (b[0], b[1]))[2]


def mode_context(ctx: CouncilContext, mode: Mode) -> tuple[CouncilContext, int, bool]:
    """The settings a mode's members run under, how many answer, and whether a judge rules.

    The judge's (first) backend is the best model: `self-consistency` and `self-moa` sample it
    as every specialist; `single` is the judge alone. No judge tools; peer review only in
    `council-review`.
    """
    reading = "split" if mode == Mode.council_split else ctx.evidence
    if mode not in _COUNCILS:
        reading = "shared"  # samples of one model: the same chunks each
    base = dataclasses.replace(
        ctx, judge_tools=False, review=mode == Mode.council_review, evidence=reading
    )
    if mode == Mode.single:
        return base, 0, True
    best = dataclasses.replace(base, specialists=(ctx.judges[0],))
    if mode == Mode.adaptive:  # `self-moa`'s samples, only where they are drawn
        return best, ctx.k - 1, True
    if mode in (Mode.vote, Mode.select):  # `self-consistency`'s candidates, chosen otherwise
        return best, ctx.k - 1, False
    if mode in _COUNCILS:
        return base, ctx.k, True
    return best, ctx.k - 1, mode != Mode.self_consistency  # the judge's answer is the first


_COUNCILS = (Mode.council, Mode.council_review, Mode.council_split)


@dataclasses.dataclass
class ArmsRun:
    """Several modes on one question, sharing their work (`run_arms`)."""

    results: dict[str, ModeResult]
    """Per mode, its answer and what the mode costs alone (`calls`, tokens, `wall_s`)."""
    calls: int
    """Model calls the shared run made (each shared call once)."""
    prompt_tokens: int
    output_tokens: int
    wall_s: float


@dataclasses.dataclass
class _Stage:
    """One part of a shared run: its output state, its calls' reports and its wall time."""

    out: dict[str, Any]
    budgets: list[dict[str, Any]]
    wall_s: float


_SHARED = ("question", "conversation", "chunks", "retrieval", "notes", "started_at", "tool_calls")
"""The keys of retrieval's output every later stage starts from."""


def _member_order(proposals: list[Proposal]) -> list[Proposal]:
    """Proposals by member index (the reducer keeps them in the order they finished)."""
    return sorted(proposals, key=lambda p: agents.member_index(p["member"]))


async def _stage(graph: Any, state: dict[str, Any], settings: CouncilContext) -> _Stage:
    started = time.perf_counter()
    out = await graph.ainvoke(state, context=settings)
    return _Stage(dict(out), list(out.get("budgets") or []), time.perf_counter() - started)


async def run_arms(question: str, modes: Sequence[Mode], ctx: CouncilContext) -> ArmsRun:
    """Answer `question` in each of `modes`; a call two modes would make alike is made once.

    One retrieval serves every mode, and one judge's own answer (`single`'s answer): every
    other mode starts from it. The best model's K-1 samples (K answers with the own one) serve
    `self-consistency` and `self-moa`. Council modes that read the chunks alike share their
    specialists (`council-review` reviews the council's proposals). After retrieval, stages
    that do not wait on each other run at once (the own answer and every set of members, then
    every judge): a backend that batches (the in-process engine, llama-server's slots) decodes
    them together. Each result reports what its mode costs alone: the calls it reads, their
    tokens, and the wall time of retrieval plus its own stages (measured beside the others).

    Long: the stages share one retrieval, one own answer and one set of samples, kept as local
    state that each stage's closure reads; split apart they would pass it all as arguments.

    Raises:
        BackendError: A model failed where a mode cannot go on without it (the judge).
        QuorumError: Too few specialists answered for the judge to rule.
    """
    started = time.perf_counter()
    retrieval = await _stage(build_answer_graph(0, judge=False), {"question": question}, ctx)
    state = {key: retrieval.out[key] for key in _SHARED if key in retrieval.out}
    ordered = sorted(dict.fromkeys(modes), key=MODES.index)
    plans = {mode: mode_context(ctx, mode) for mode in ordered}
    readings: dict[tuple[bool, str], tuple[CouncilContext, int]] = {}
    for mode, (settings, count, _) in plans.items():
        if count and mode != Mode.adaptive:  # adaptive's wait for the own answer
            readings.setdefault((mode in _COUNCILS, settings.evidence), (settings, count))
    alone = build_answer_graph(0, judge=True, retrieved=True, quorum=False)
    own, *sets = await asyncio.gather(
        _stage(alone, {**state, "proposals": []}, mode_context(ctx, Mode.single)[0]),
        *(
            _stage(build_answer_graph(count, judge=False, retrieved=True), state, settings)
            for settings, count in readings.values()
        ),
    )
    members = dict(zip(readings, sets, strict=True))
    state["own"] = own.out["own"]
    threshold = DEFAULT_CONFIDENT_AT if ctx.confident_at is None else ctx.confident_at
    escalate = Mode.adaptive in plans and not is_confident(own.out, threshold)
    late: list[_Stage] = []  # adaptive's samples, drawn after the own answer
    if escalate:
        settings, count, _ = plans[Mode.adaptive]
        if (False, settings.evidence) not in members:
            samples = build_answer_graph(count, judge=False, retrieved=True)
            late.append(await _stage(samples, state, settings))
            members[(False, settings.evidence)] = late[0]
    judged = [
        m
        for m, (_, count, judges) in plans.items()
        if count and judges and (m != Mode.adaptive or escalate)
    ]
    judge = build_answer_graph(0, judge=True, retrieved=True)

    def proposals(mode: Mode) -> list[Proposal]:
        key = (mode in _COUNCILS, plans[mode][0].evidence)
        return _member_order(members[key].out["proposals"])

    # adaptive's verdict is self-moa's (the same samples and judge) where both run
    ruling = [m for m in judged if not (m == Mode.adaptive and Mode.self_moa in judged)]
    ruled = [_stage(judge, {**state, "proposals": proposals(m)}, plans[m][0]) for m in ruling]
    picking = []
    if Mode.select in plans:
        candidates = [_own_proposal(own.out), *proposals(Mode.select)]
        picking.append(_pick(question, candidates, plans[Mode.select][0]))
    decided: list[Any] = list(await asyncio.gather(*ruled, *picking))
    verdicts = dict(zip(ruling, decided[: len(ruling)], strict=True))
    picked = decided[len(ruling) :]
    if Mode.adaptive in judged and Mode.adaptive not in verdicts:
        verdicts[Mode.adaptive] = verdicts[Mode.self_moa]
    results: dict[str, ModeResult] = {}
    for mode, (settings, count, _) in plans.items():
        calls, wall = list(own.budgets), retrieval.wall_s + own.wall_s
        stages = {"retrieval": retrieval.wall_s, "own": own.wall_s}
        if not count or (mode == Mode.adaptive and not escalate):
            results[mode] = _result(mode, own.out, settings, True, calls, wall, stages)
            continue
        stage = members[(mode in _COUNCILS, settings.evidence)]
        calls += stage.budgets
        stages["members"] = stage.wall_s
        # adaptive draws its samples after the own answer: their times add up
        both = own.wall_s + stage.wall_s if mode == Mode.adaptive else None
        wall = retrieval.wall_s + (both or max(own.wall_s, stage.wall_s))
        if mode in verdicts:
            calls += verdicts[mode].budgets
            wall += verdicts[mode].wall_s
            stages["verdict"] = verdicts[mode].wall_s
            out = verdicts[mode].out
        else:  # the judge's answer is the first of the candidates
            out = {**stage.out, "proposals": [_own_proposal(own.out), *proposals(mode)]}
        chosen = None
        if mode == Mode.select:
            chosen, pick = picked[0]
            calls += pick.budgets
            wall += pick.wall_s
            stages["select"] = pick.wall_s
        results[mode] = _result(mode, out, settings, mode in verdicts, calls, wall, stages, chosen)
    if Mode.adaptive in results:
        results[Mode.adaptive].escalated = escalate
    ruled_once = list({id(v): v for v in verdicts.values()}.values())
    stages_made = (retrieval, own, *sets, *late, *ruled_once, *(p for _, p in picked))
    made = [b for stage in stages_made for b in stage.budgets]
    return ArmsRun(
        results=results,
        calls=len(made),
        prompt_tokens=sum(b["prompt_tokens"] for b in made),
        output_tokens=sum(b.get("output_tokens") or 0 for b in made),
        wall_s=time.perf_counter() - started,
    )


def _own_proposal(out: dict[str, Any]) -> Proposal:
    """The judge's own answer as a candidate beside the samples (`self-consistency`)."""
    return Proposal(
        member=agents.JUDGE,
        model=out["own"]["judge"],
        text=out["answer"],
        citations=[],
        unknown_citations=[],
        error=None,
        evidence={"seen": list(out["own"]["shown"])},
        **out["own"].get("confidence", {}),
    )


def _result(
    mode: Mode,
    out: dict[str, Any],
    settings: CouncilContext,
    judged: bool,
    calls: list[dict[str, Any]],
    wall_s: float,
    stages: dict[str, float],
    chosen: Proposal | None = None,
) -> ModeResult:
    """A mode's result from its stages' output, with the calls it made alone.

    `chosen`: the candidate that stands where the mode has no judge (`select`'s pick); else
    the most consistent (`vote`: the confidence-weighted vote's).
    """
    proposals: list[Proposal] = out["proposals"]
    if judged:
        answer, unknown = out["answer"], list(out["unknown_citations"])
        cited = [c["id"] for c in out["citations"]]
        support, evidence = out["citation_support"], out["evidence"]
        confidence = confidence_fields(None, out.get("confidence_note"))
        if out.get("confidence"):
            confidence = {"confidence": out["confidence"]}
    else:
        store = open_knowledge(settings)
        if chosen is None:
            chosen = most_consistent(proposals) if mode != Mode.vote else _vote(proposals, store)
        seen_by = (chosen.get("evidence") or {}).get("seen", [])
        supplied = {i: c for i in seen_by if (c := store.get(i)) is not None}
        answer = clean(
            chosen["text"], [specialist.ANSWER], (), [c.heading for c in supplied.values()]
        )
        cited, unknown = split_citations(answer, list(supplied))
        support = support_share(check_claims(answer, shown_whole(supplied)))
        evidence = council_evidence(settings.evidence, proposals)
        confidence = confidence_fields(None, chosen.get("confidence_note"))
        if chosen.get("confidence"):
            confidence = {"confidence": chosen.get("confidence")}
    sources = {c["id"]: c.get("source", "") for c in out["retrieval"]["chunks"]}
    return ModeResult(
        mode=mode,
        answer=answer,
        citations=[{"id": i, "source": sources.get(i, "")} for i in dict.fromkeys(cited)],
        unknown_citations=list(unknown),
        supplied=list(sources),
        seen=list(dict.fromkeys([*(out.get("own") or {}).get("shown", {}), *_seen(proposals)])),
        evidence=evidence,
        citation_support=support,
        proposals=proposals,
        calls=len(calls),
        prompt_tokens=sum(b["prompt_tokens"] for b in calls),
        output_tokens=sum(b.get("output_tokens") or 0 for b in calls),
        wall_s=wall_s,
        confidence=confidence,
        stages={name: round(seconds, 2) for name, seconds in stages.items()},
    )


async def _pick(
    question: str, candidates: list[Proposal], settings: CouncilContext
) -> tuple[Proposal, _Stage]:
    """The candidate the best model names as the most consistent (universal self-consistency).

    One call of the judge's model (the reviewer's budget plan) shown the candidates,
    anonymised; where it fails or names none, the most consistent by word overlap stands.
    """
    answered = [p for p in candidates if p["text"]] or candidates
    shown = dict(zip(review_prompt.labels(len(answered)), answered, strict=True))
    started = time.perf_counter()
    budgets: list[dict[str, Any]] = []
    try:
        call = await budgeted_call(
            settings,
            role="reviewer",
            agent="select",
            backend=resolve_backend(settings.judges[0]),
            contents=[
                text_section("system", select_prompt.SYSTEM),
                text_section("task", select_prompt.task_text(question)),
                labelled_section(
                    "proposals", [(label, neutralise(p["text"])) for label, p in shown.items()]
                ),
            ],
            compose=select_prompt.compose,
            question=question,
            json_schema=select_prompt.schema(list(shown)),
            output_cap=select_prompt.OUTPUT_CAP,
        )
        budgets.append(call.report_dict)
        chosen = shown[json.loads(call.result.text)["most_consistent"]]
    except (BackendError, BudgetError, ValueError, KeyError, TypeError):
        chosen = most_consistent(answered)
    out = {"proposals": candidates}
    return chosen, _Stage(out, budgets, time.perf_counter() - started)


def _vote(proposals: list[Proposal], store: Any) -> Proposal:
    """`confident_vote` with each candidate read against the chunks its prompt showed."""
    things = {}
    for p in proposals:
        seen = (p.get("evidence") or {}).get("seen", [])
        chunks = {i: c for i in seen if (c := store.get(i)) is not None}
        things[p["member"]] = reduced_answer(p["text"], chunks)
    return confident_vote(proposals, things)


def _seen(proposals: list[Proposal]) -> list[str]:
    """The chunks the proposals' prompts showed, in their order."""
    return [i for p in proposals for i in (p.get("evidence") or {}).get("seen", [])]


async def run_mode(question: str, mode: Mode, ctx: CouncilContext) -> ModeResult:
    """Answer `question` in `mode` under `ctx` (its judge is the best model; k is K).

    Raises:
        BackendError: A model failed where the mode cannot go on without it (the judge).
        QuorumError: Too few specialists answered for the judge to rule.
    """
    mode = Mode(mode)  # a plain string from a script: its member, or ValueError
    return (await run_arms(question, [mode], ctx)).results[mode]
