"""specialist: one council member answers from the KB chunks its access allows."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from collective import agents
from collective.budget.assembly import SectionContent, chunks_section, text_section
from collective.budget.trimming import Scored
from collective.errors import BackendError, BackendTimeout, BudgetError
from collective.graph.context import CouncilContext
from collective.graph.state import Proposal, SpecialistTask
from collective.kb.citations import split_citations
from collective.kb.evidence import MemberEvidence
from collective.models.refs import resolve_backend
from collective.nodes.chunks import chunks_from_state, scored_chunks
from collective.nodes.model_call import ModelCall, NodeProgress, call_model
from collective.nodes.retry import TRANSIENT_RETRY, is_transient
from collective.prompts import specialist as prompt

__all__ = ["member_sections", "specialist"]


async def specialist(task: SpecialistTask, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """Answer as one member; a failure is recorded in the proposal, never fatal to the council.

    Transient backend errors are raised while LangGraph's retry policy has attempts left.
    """
    ctx = runtime.context
    member = task["member"]
    backend = resolve_backend(ctx.member_backend(task["index"]))
    chunks = scored_chunks(chunks_from_state(task["chunks"]), ctx.hidden_tags)
    kb = MemberEvidence(chunks, ctx.k, task["index"], ctx.evidence)  # shared, or head + slice
    progress = NodeProgress(member, backend.model)
    written: list[str] = []  # what the member has streamed, kept if it runs out of time
    try:
        call = await asyncio.wait_for(
            call_model(
                ctx.for_member(task["index"]),  # members on one model sample differently
                node=member,
                backend=backend,
                contents=member_sections(
                    task["question"], task["plan"], task["conversation"], chunks, member, ctx.k, kb
                ),
                compose=prompt.compose,
                question=task["question"],
                retrieval_profile=task["retrieval_profile"],
                on_token=written.append,
            ),
            timeout=ctx.specialist_timeout_s,
        )
    except (BackendError, BudgetError, TimeoutError) as error:
        if isinstance(error, TimeoutError) and "".join(written).strip():
            return _partial(member, backend.model, "".join(written).strip(), kb, progress)
        if isinstance(error, TimeoutError):
            error = BackendTimeout(
                f"{member} ({backend.model}) gave no answer within {ctx.specialist_timeout_s:g} s; "
                "raise specialist_timeout_s or use a faster model"
            )
        attempt = runtime.execution_info.node_attempt if runtime.execution_info else 1
        if is_transient(error) and attempt < TRANSIENT_RETRY.max_attempts:
            raise error from None
        return _failed(member, backend.model, f"{type(error).__name__}: {error}", progress)
    text = call.result.text.strip()
    if not text:  # a member that stops at once gave no answer: it does not count to the quorum
        why = (
            f"{member} ({backend.model}) wrote nothing (finish_reason {call.result.finish_reason})"
        )
        return _failed(member, backend.model, f"EmptyAnswer: {why}", progress, call)
    timings = progress.done(call)
    # Only chunks the prompt really showed (kept after trimming, tag intact) can be cited.
    cited, unknown = split_citations(text, call.prompt.kept("kb_chunks"))
    proposal = Proposal(
        member=member,
        model=backend.model,
        text=text,
        citations=cited,
        unknown_citations=unknown,
        error=None,
        evidence=kb.summary(call.prompt.kept("kb_chunks")),
    )
    return {
        "proposals": [proposal],
        "budgets": [call.report_dict],
        "timings": timings,
    }


def member_sections(
    question: str,
    plan: str,
    conversation: str,
    chunks: list[Scored],
    member: str,
    k: int,
    evidence: MemberEvidence | None = None,
) -> list[SectionContent]:
    """A member's prompt sections: all but its own part are the same for every member.

    The task is sized alike for the K members (`text_section(alike=...)`), so every section
    fitted after it comes out the same and the members' prompts share one prefix. With split
    `evidence` the KB section is the shared head plus the member's own slice, which the prompt
    puts after the shared prefix (`collective.prompts.council.compose`).
    """
    return [
        text_section("system", prompt.SYSTEM.format(k=k)),
        text_section("conversation_summary", conversation, keep="end"),
        evidence.section("kb_chunks") if evidence else chunks_section("kb_chunks", chunks),
        text_section(
            "task",
            prompt.task_text(question, plan, member, k),
            alike=[prompt.task_text(question, plan, m, k) for m in agents.members(k)],
        ),
    ]


def _failed(
    member: str, model: str, error: str, progress: NodeProgress, call: ModelCall | None = None
) -> dict[str, Any]:
    """The proposal of a member that gave no answer: its error, and its call's report if any."""
    timings = progress.done(call, status="failed", error=error.partition(": ")[2] or error)
    failed = Proposal(
        member=member, model=model, text="", citations=[], unknown_citations=[], error=error
    )
    out: dict[str, Any] = {"proposals": [failed], "timings": timings}
    if call is not None:
        out["budgets"] = [call.report_dict]
    return out


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
