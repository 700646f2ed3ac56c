"""specialist: one council member answers from the KB chunks its access allows."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from collective import agents
from collective.budget.assembly import SectionContent, chunks_section, text_section
from collective.budget.trimming import Scored
from collective.errors import BackendError, BackendTimeout, BudgetError, InvalidResponse
from collective.graph.context import CouncilContext
from collective.graph.state import Proposal, SpecialistTask
from collective.kb.citations import split_citations
from collective.kb.evidence import MemberEvidence
from collective.models.base import ChatResult
from collective.models.confidence import confidence_fields
from collective.models.refs import resolve_backend
from collective.nodes.chunks import chunks_from_state, scored_chunks
from collective.nodes.early_stop import StoppedEarly, race_of
from collective.nodes.model_call import ModelCall, NodeProgress, call_model
from collective.nodes.retry import TRANSIENT_RETRY, is_transient
from collective.prompts import council
from collective.prompts import specialist as prompt
from collective.verdict.agreement import reduced_answer

__all__ = ["ASKED_AGAIN", "member_sections", "specialist"]

ASKED_AGAIN = "asked again"
"""How the note of a call that asked looping members once more starts (`_asked_again`)."""


async def specialist(task: SpecialistTask, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """Answer as one member, or as several that sample one prompt alike in one request.

    `task["samples"]` members from `task["index"]` on; a failure is recorded in the proposals,
    never fatal to the council.

    Transient backend errors are raised while LangGraph's retry policy has attempts left.

    Long: the call, its asking again (`_asked_again`) and each way it can fail share the
    member's prompt, progress and race, kept as locals that `ask` closes over.
    """
    ctx = runtime.context
    index, samples = task["index"], task.get("samples", 1)
    names = [agents.member(index + j) for j in range(samples)]
    member = names[0] if samples == 1 else None  # samples are named by none in the prompt
    backend = resolve_backend(ctx.member_backend(index))
    chunks = scored_chunks(chunks_from_state(task["chunks"]), ctx.hidden_tags)
    kb = MemberEvidence(chunks, ctx.k, index, ctx.evidence)  # shared, or head + slice
    progress = [NodeProgress(name, backend.model) for name in names]
    written: list[str] = []  # what the first member has streamed, kept if it runs out of time
    race = race_of(task.get("race"))

    def ask(answer: str, samples: int) -> Awaitable[ModelCall]:
        return call_model(
            ctx.for_member(index),  # members on one model sample differently
            node=names[0],
            backend=backend,
            contents=member_sections(
                task["question"],
                task["plan"],
                task["conversation"],
                chunks,
                member,
                ctx.k,
                kb,
                answer,
            ),
            compose=prompt.compose,
            question=task["question"],
            retrieval_profile=task["retrieval_profile"],
            on_token=written.append,
            output_cap=_answer_cap(ctx),
            samples=samples,
        )

    try:
        answering = ask(prompt.ANSWER, samples)
        call = await asyncio.wait_for(
            race.run(names[0], answering) if race is not None else answering,
            timeout=ctx.specialist_timeout_s,
        )
    except StoppedEarly as stopped:
        return _merge(
            [
                _stopped(n, backend.model, str(stopped), p)
                for n, p in zip(names, progress, strict=True)
            ]
        )
    except (BackendError, BudgetError, TimeoutError) as error:
        if isinstance(error, TimeoutError) and "".join(written).strip():
            partial = _partial(names[0], backend.model, "".join(written).strip(), kb, progress[0])
            error = BackendTimeout(
                f"the samples after {names[0]}'s ({backend.model}) were not finished within "
                f"{ctx.specialist_timeout_s:g} s"
            )
            return _merge([partial, *_each_failed(names[1:], backend.model, error, progress[1:])])
        if isinstance(error, TimeoutError):
            error = BackendTimeout(
                f"{names[0]} ({backend.model}) gave no answer within "
                f"{ctx.specialist_timeout_s:g} s; raise specialist_timeout_s or use a faster model"
            )
        attempt = runtime.execution_info.node_attempt if runtime.execution_info else 1
        if is_transient(error) and attempt < TRANSIENT_RETRY.max_attempts:
            raise error from None
        return _merge(_each_failed(names, backend.model, error, progress))
    results = [call.result, *call.result.samples]
    budgets = [call.report_dict, *await _asked_again(results, ask, ctx.specialist_timeout_s)]
    # Only chunks the prompt really showed (kept after trimming, tag intact) can be cited.
    shown = tuple(call.prompt.kept("kb_chunks"))
    outs = [
        _answered(name, backend.model, result, shown, kb, one, replace(call, result=result))
        for name, result, one in zip(names, results, progress, strict=False)
    ]
    missing = InvalidResponse(f"{backend.spec} gave {len(results)} of {samples} completions")
    outs += _each_failed(names[len(results) :], backend.model, missing, progress[len(results) :])
    if race is not None:
        supplied = {c.id: c for c in chunks_from_state(task["chunks"])}
        for out in outs:
            for p in out["proposals"]:
                if not p["error"]:
                    seen = (p.get("evidence") or {}).get("seen")
                    race.answered(p["member"], reduced_answer(p["text"], supplied, seen))
    return _merge(outs) | {"budgets": budgets}


def _answer_cap(ctx: CouncilContext) -> int | None:
    """A member's output cap: the format's (`prompt.MAX_TOKENS`) where the config sets none.

    `output_caps.specialist`, or a `budgets.specialist` plan with its own output, sizes members'
    answers instead.
    """
    configured = agents.ROLES[agents.SPECIALIST] in {*ctx.output_caps, *ctx.budgets}
    return None if configured else prompt.MAX_TOKENS


def _answered(
    member: str,
    model: str,
    result: ChatResult,
    shown: tuple[str, ...],
    kb: MemberEvidence,
    progress: NodeProgress,
    call: ModelCall,
) -> dict[str, Any]:
    """One member's proposal from its completion (none written: a failed proposal)."""
    text = result.text.strip()
    if result.finish_reason == "length":  # stopped at the cap: no half claim goes on
        text = council.finished(text)
    if not text:  # a member that stops at once gave no answer: it does not count to the quorum
        why = f"{member} ({model}) wrote nothing (finish_reason {result.finish_reason})"
        return _failed(member, model, f"EmptyAnswer: {why}", progress, call)
    cited, unknown = split_citations(text, shown)
    proposal = Proposal(
        member=member,
        model=model,
        text=text,
        citations=cited,
        unknown_citations=unknown,
        error=None,
        evidence=kb.summary(shown),
        finish_reason=result.finish_reason,
        **confidence_fields(result.confidence, result.confidence_note),  # type: ignore[typeddict-item]
    )
    return {"proposals": [proposal], "timings": progress.done(call)}


async def _asked_again(
    results: list[ChatResult],
    ask: Callable[[str, int], Awaitable[ModelCall]],
    timeout_s: float,
) -> list[dict[str, Any]]:
    """`results` that are bullets alone, asked once more in other words (`prompt.ANSWER_AGAIN`).

    Replaced in place where the call answers (else kept as they were); returns its report, with
    a note that starts with `ASKED_AGAIN`.
    """
    again = [n for n, r in enumerate(results) if _bullets_only(r.text)]
    if not again:
        return []
    try:
        redone = await asyncio.wait_for(ask(prompt.ANSWER_AGAIN, len(again)), timeout=timeout_s)
    except (BackendError, BudgetError, TimeoutError):
        return []
    for n, result in zip(again, [redone.result, *redone.result.samples], strict=False):
        results[n] = result
    answers = len(results)
    which = "the answer was" if answers == 1 else f"{len(again)} of {answers} answers were"
    why = f"{ASKED_AGAIN}: {which} bullets alone"
    return [redone.report_dict | {"notes": [*redone.report_dict["notes"], why]}]


def _bullets_only(text: str) -> bool:
    """Whether an answer holds no word, only bullets ("- - - -" to the output cap)."""
    return bool(text.strip()) and not re.search(r"[^\W\d_]{2}", text)


def _merge(outs: list[dict[str, Any]]) -> dict[str, Any]:
    """The state update of several members' outcomes (proposals in member order)."""
    merged: dict[str, Any] = {"proposals": [], "timings": {}}
    for out in outs:
        merged["proposals"] += out["proposals"]
        merged["timings"] |= out["timings"]
    return merged


def _each_failed(
    members: list[str], model: str, error: Exception, progress: list[NodeProgress]
) -> list[dict[str, Any]]:
    """The failed proposals of `members`, all for one `error`."""
    why = f"{type(error).__name__}: {error}"
    return [_failed(m, model, why, p) for m, p in zip(members, progress, strict=True)]


def member_sections(
    question: str,
    plan: str,
    conversation: str,
    chunks: list[Scored],
    member: str | None,
    k: int,
    evidence: MemberEvidence | None = None,
    answer: str = prompt.ANSWER,
) -> list[SectionContent]:
    """A member's prompt sections: all but its own part are the same for every member.

    The task is sized alike for the K members (`council.task_section`), so every section
    fitted after it comes out the same and the members' prompts share one prefix. With split
    `evidence` the KB section is the shared head plus the member's own slice, which the prompt
    puts after the shared prefix (`collective.prompts.council.compose`).
    """
    return [
        text_section("system", prompt.SYSTEM.format(k=k)),
        text_section("conversation_summary", conversation, keep="end"),
        evidence.section("kb_chunks") if evidence else chunks_section("kb_chunks", chunks),
        council.task_section(
            prompt.task_text(question, plan, member, k, answer),
            alike=[prompt.task_text(question, plan, m, k, answer) for m in agents.members(k)],
        ),
    ]


def _failed(
    member: str, model: str, error: str, progress: NodeProgress, call: ModelCall | None = None
) -> dict[str, Any]:
    """The proposal of a member that gave no answer, with its error."""
    timings = progress.done(call, status="failed", error=error.partition(": ")[2] or error)
    failed = Proposal(
        member=member, model=model, text="", citations=[], unknown_citations=[], error=error
    )
    return {"proposals": [failed], "timings": timings}


def _stopped(member: str, model: str, reason: str, progress: NodeProgress) -> dict[str, Any]:
    """The proposal of a member early stop cancelled: no answer, and why it needs none."""
    timings = progress.done(status="stopped", reason=reason)
    stopped = Proposal(
        member=member,
        model=model,
        text="",
        citations=[],
        unknown_citations=[],
        error=f"StoppedEarly: {reason}",
        stopped=True,
    )
    return {"proposals": [stopped], "timings": timings}


def _partial(
    member: str, model: str, text: str, kb: MemberEvidence, progress: NodeProgress
) -> dict[str, Any]:
    """The proposal of a member that ran out of time: what it wrote, marked `partial`.

    Its citations are checked against the chunks its own prompt held, not all candidates.
    """
    cited, unknown = split_citations(text, kb.kept)
    timings = progress.done(status="done", partial=True)
    proposal = Proposal(
        member=member,
        model=model,
        text=text,
        citations=cited,
        unknown_citations=unknown,
        error=None,
        partial=True,
        evidence=kb.summary(kb.kept),
    )
    return {"proposals": [proposal], "timings": timings}
