"""judge: weigh the proposals against the full KB view, verify with tools, rule, check citations."""

from __future__ import annotations

import asyncio
import functools
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.runtime import Runtime

from collective import agents
from collective.budget.assembly import (
    SectionContent,
    chunks_section,
    labelled_section,
    text_section,
)
from collective.budget.counting import ChatMessage, TokenCounter
from collective.budget.trimming import Fitted, Scored, share_fairly
from collective.errors import BackendError, BackendUnavailable, BudgetError, InvalidResponse
from collective.graph.context import CouncilContext, open_knowledge
from collective.graph.state import CouncilState, Proposal, answered, applied_profile
from collective.kb.citations import check_citations, format_chunk, neutralise, shown_ids, tag
from collective.kb.evidence import council_evidence, seen_counts
from collective.kb.store import Chunk
from collective.kb.support import Claim, cited_claims, drop_claims, support_share
from collective.kb.tools import VerificationTools
from collective.models.base import Backend, ToolCall
from collective.models.refs import resolve_backend
from collective.nodes.chunks import chunks_from_state, scored_chunks
from collective.nodes.model_call import ModelCall, NodeProgress, call_model, emit
from collective.nodes.review import aggregate_rankings
from collective.prompts import judge as prompt
from collective.telemetry import record_fallback, record_tool_call

__all__ = ["judge"]


def evidence(proposals: list[Proposal], chunks: Mapping[str, Chunk]) -> list[Scored]:
    """The chunks the specialists cited, once each: those several members cite first.

    Each says who cited it and, where members read different parts (split evidence), whether
    it rests on one member's reading alone (only that member saw it).
    """
    counts = Counter(i for p in proposals for i in p["citations"] if i in chunks)
    by_member: dict[str, list[str]] = {}
    for p in proposals:
        for i in p["citations"]:
            by_member.setdefault(i, []).append(p["member"])
    seen = seen_counts(proposals)
    split = any((p.get("evidence") or {}).get("mode") == "split" for p in proposals)

    def label(i: str) -> str:
        members = by_member[i]
        if len(members) > 1:
            return f"(supported by {len(members)} members: {', '.join(members)})"
        if split and seen[i] <= 1:
            return f"(only {members[0]} saw this chunk: check the claim against it)"
        return f"(cited by {members[0]} only)"

    return [
        Scored(i, f"{format_chunk(chunks[i])}\n{label(i)}", float(n), mark=tag(i))
        for i, n in counts.most_common()
    ]


class ToolTranscript:
    """The judge's tool rounds so far: the `tools` budget section and the messages it implies.

    The section holds the tool schemas (sent beside the messages) and every tool result; results
    share what the schemas leave fairly and are trimmed with the usual markers. `messages()`
    replays the rounds with the results exactly as last fitted.
    """

    def __init__(self, rounds: Sequence[Sequence[tuple[ToolCall, str]]], schemas: list[dict]):
        self.rounds = rounds
        self.schema_text = json.dumps(schemas) if schemas else ""
        self.fitted = [result for calls in rounds for _, result in calls]

    def section(self) -> SectionContent:
        """The `tools` section content."""
        return SectionContent("tools", self._fit)

    def _fit(self, counter: TokenCounter, limit: int) -> Fitted:
        schema = counter.count(self.schema_text)
        results = [result for calls in self.rounds for _, result in calls]
        parts = share_fairly(counter, results, max(0, limit - schema), keep="start")
        self.fitted = [p.text for p in parts]
        used = schema + sum(p.tokens for p in parts)
        return Fitted(self.schema_text, used, trimmed=any(p.trimmed for p in parts))

    def compose(
        self, base: Callable[..., list[ChatMessage]]
    ) -> Callable[[Mapping[str, str]], list[ChatMessage]]:
        """`base`'s messages followed by the tool rounds, or with them told as text.

        In the final round no tools are offered: the rounds are then told as text inside the
        user turn, before the instructions (`base(sections, checked=...)`). A small model shown
        tool-call turns kept writing tool calls instead of the verdict, and shown a turn of its
        own saying what it checked, the 1.5B judge repeated that turn as its verdict.
        """
        if self.rounds and not self.schema_text:
            return lambda sections: base(sections, checked=self.told())
        return lambda sections: [*base(sections), *self.messages()]

    def told(self) -> str:
        """The tool calls made and their results (as last fitted), as plain text."""
        fitted = iter(self.fitted)
        made = [call for round_calls in self.rounds for call, _ in round_calls]
        return "\n\n".join(
            f"You called {c.name}({json.dumps(c.arguments)}); the result:\n{next(fitted)}"
            for c in made
        )

    def messages(self) -> list[ChatMessage]:
        """The assistant tool-call messages and tool results, round by round."""
        out: list[ChatMessage] = []
        fitted = iter(self.fitted)
        for calls in self.rounds:
            out.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": json.dumps(call.arguments),
                            },
                        }
                        for call, _ in calls
                    ],
                }
            )
            out += [
                {"role": "tool", "tool_call_id": call.id, "content": next(fitted)}
                for call, _ in calls
            ]
        return out


def run_tools(
    tools: VerificationTools, counter: TokenCounter, calls: Sequence[ToolCall], n_ctx: int
) -> list[tuple[ToolCall, str, int]]:
    """Run one round's tool calls (blocking: the KB, and counting may be HTTP): results, tokens.

    A result is counted up to the judge's context `n_ctx` (`TokenCounter.within_reach`): a
    longer one (a huge chunk in an old KB) reports the count of that cut, already too many.
    """
    results = []
    for call in calls:
        result = tools.run(call.name, call.arguments)
        tokens = counter.count(counter.within_reach([result], n_ctx)[0])
        record_tool_call(call.name, call.arguments, len(result), tokens)
        results.append((call, result, tokens))
    return results


async def judge(state: CouncilState, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """Synthesize the verdict and resolve its citations against the chunks supplied."""
    ctx = runtime.context
    members = answered(state.get("proposals", []))  # the quorum node checked their number
    aggregate = aggregate_rankings(state.get("rankings", []), members)
    retrieved = chunks_from_state(state.get("chunks", []))
    chunks = {c.id: c for c in retrieved}
    retrieval_profile = applied_profile(state)
    ranking = "\n".join(
        f"Peer review: {row['member']} mean rank {row['mean_rank']:.2f} ({row['votes']} votes)"
        for row in aggregate
    )
    contents = [
        text_section("system", prompt.SYSTEM),
        text_section("conversation_summary", state.get("conversation", ""), keep="end"),
        text_section("task", prompt.task_text(state["question"], state.get("plan", ""), ranking)),
        chunks_section("kb_chunks", scored_chunks(retrieved)),
        labelled_section(
            "proposals",
            # a proposal's verified citations stay tags the verdict can carry forward
            [(_proposal_label(p), neutralise(p["text"], p["citations"])) for p in members],
        ),
        chunks_section("evidence", evidence(members, chunks)),
    ]
    refs = ctx.judges
    failures: list[str] = []
    for n, ref in enumerate(refs, 1):
        backend = resolve_backend(ref)
        progress = NodeProgress(agents.JUDGE, backend.model)
        try:
            out = await _rule(state, ctx, backend, contents, chunks, retrieval_profile, progress)
        except (BackendError, BudgetError) as error:
            if len(refs) == 1:
                raise
            failure = f"judge {backend.spec} failed ({type(error).__name__}): {error}"
            failures.append(failure)
            record_fallback(agents.JUDGE, backend.spec, error)
            progress.done(status="failed", error=failure)
            if n == len(refs):
                raise BackendUnavailable(
                    f"every judge failed: {'; '.join(failures)}. Start one of them or configure "
                    "a working judge."
                ) from error
            continue
        out["ranking_aggregate"] = aggregate
        out["evidence"] = council_evidence(ctx.evidence, members)
        out["notes"] = [*state.get("notes", []), *failures, *out["notes"]]
        return out
    raise AssertionError("unreachable: refs is never empty")


def _logged(results: list[tuple[ToolCall, str, int]], round_number: int) -> list[dict[str, Any]]:
    """The tool log's entries of one round, each also sent to the stream as it is logged."""
    entries = []
    for tool_call, result, tokens in results:
        entry = {
            "name": tool_call.name,
            "arguments": tool_call.arguments,
            "result_chars": len(result),
            "tokens": tokens,
            "round": round_number,
        }
        emit({"type": "tool_call", "node": agents.JUDGE, **entry})
        entries.append(entry)
    return entries


def _proposal_label(proposal: Proposal) -> str:
    """A proposal's heading in the judge's prompt; a partial one says so."""
    label = f"### {proposal['member']} ({proposal['model']})"
    if proposal.get("partial"):
        label += " [PARTIAL: the member ran out of time; its answer stops mid-way]"
    return label


@dataclass
class _Draft:
    """The judge's calls up to its draft verdict, and how the draft's prompt was made."""

    call: ModelCall
    """The last call: its answer is the draft verdict."""
    transcript: ToolTranscript
    compose: Callable[[Mapping[str, str]], list[ChatMessage]]
    tools: list[dict[str, Any]] | None
    """The tool schemas the draft's call offered."""
    tool_log: list[dict[str, Any]]
    budgets: list[dict[str, Any]]


async def _tool_rounds(
    state: CouncilState,
    ctx: CouncilContext,
    backend: Backend,
    contents: list[SectionContent],
    retrieval_profile: str,
    tools: VerificationTools | None,
    notes: list[str],
) -> _Draft:
    """The judge's calls up to its draft verdict: tool rounds while tools are offered.

    A note is added for a tool call that could not be parsed.
    """
    counter = await backend.token_counter()
    rounds: list[list[tuple[ToolCall, str]]] = []
    tool_log: list[dict[str, Any]] = []
    budgets: list[dict[str, Any]] = []
    usable = tools is not None
    for round_number in range(1, ctx.tool_rounds + 2):
        # The last round offers no tools, so the loop always ends with a verdict.
        offer = tools if usable and round_number <= ctx.tool_rounds else None
        transcript = ToolTranscript(rounds, offer.schemas if offer else [])
        compose = transcript.compose(
            functools.partial(prompt.compose, verify=bool(offer) and not rounds)
        )
        try:
            call = await call_model(
                ctx,
                node=agents.JUDGE,
                backend=backend,
                contents=[*contents, transcript.section()],
                compose=compose,
                question=state["question"],
                retrieval_profile=retrieval_profile,
                tools=offer.schemas if offer else None,
                # The first round checks for sure where the backend can force a call: told
                # to, the greedy 1.5B judge still ruled at once.
                tool_choice="required" if offer and not rounds else None,
            )
        except InvalidResponse as error:
            if not offer:
                raise
            # A model that cannot produce a parseable tool call still owes a verdict.
            notes.append(f"the judge's tool call was unparseable, ruling without tools: {error}")
            usable = False
            continue
        budgets.append(call.report_dict)
        if not (offer and call.result.tool_calls):
            schemas = offer.schemas if offer else None
            return _Draft(call, transcript, compose, schemas, tool_log, budgets)
        offer.shown.update(call.prompt.kept("kb_chunks", "evidence"))
        results = await asyncio.to_thread(
            run_tools, offer, counter, call.result.tool_calls, call.report.n_ctx
        )
        rounds.append([(tool_call, result) for tool_call, result, _ in results])
        tool_log += _logged(results, round_number)
    raise AssertionError("unreachable: the last round offers no tools")


async def _rule(
    state: CouncilState,
    ctx: CouncilContext,
    backend: Backend,
    contents: list[SectionContent],
    chunks: Mapping[str, Chunk],
    retrieval_profile: str,
    progress: NodeProgress,
) -> dict[str, Any]:
    """One judge backend's ruling: tool rounds, then the verdict with its citations checked."""
    notes: list[str] = []
    tools = None
    if ctx.judge_tools and backend.supports_tools:
        tools = VerificationTools(await asyncio.to_thread(open_knowledge, ctx), retrieval_profile)
    elif ctx.judge_tools:
        notes.append(f"the judge ran without tools: {backend.spec} has no native tool calling")
    draft = await _tool_rounds(state, ctx, backend, contents, retrieval_profile, tools, notes)

    def shown(call: ModelCall, transcript: ToolTranscript) -> dict[str, Chunk]:
        # Only chunks the prompt really showed (kept after trimming, tag intact) resolve.
        supplied = {i: chunks[i] for i in call.prompt.kept("kb_chunks", "evidence")}
        if tools:
            seen = shown_ids("\n".join(transcript.fitted), tools.fetched)
            supplied.update((i, tools.fetched[i]) for i in seen)
        return supplied

    supplied = shown(draft.call, draft.transcript)
    call, answer, supplied, claims, check = await _faithful_verdict(
        state, ctx, backend, contents, retrieval_profile, draft, notes, supplied, shown
    )
    citations, unknown = check_citations(answer, supplied)
    timings = progress.done(call)
    return {
        "answer": answer,
        "citations": citations,
        "unknown_citations": unknown,
        "citation_support": support_share(claims),
        "claim_check": check,
        "budgets": draft.budgets,
        "timings": timings,
        "tool_calls": draft.tool_log,
        "notes": [*notes, *call.result.warnings],
    }


async def _faithful_verdict(
    state: CouncilState,
    ctx: CouncilContext,
    backend: Backend,
    contents: list[SectionContent],
    retrieval_profile: str,
    draft: _Draft,
    notes: list[str],
    supplied: dict[str, Chunk],
    shown: Callable[[ModelCall, ToolTranscript], dict[str, Chunk]],
) -> tuple[ModelCall, str, dict[str, Chunk], list[Claim], dict[str, Any]]:
    """Each cited claim of the draft checked against its chunks (issue 29).

    Unsupported claims get one fix call, used only if it is not empty, not an echo of the check
    and no less supported than the draft; what still lacks support is dropped. The fix call
    reads on from the draft's own prompt (same messages and tools, then the draft and the
    check), so a server with a prompt cache computes only the check. Appends the fix call's
    report to the draft's budgets and what happened to `notes`.

    Returns:
        The call, verdict and supplied chunks that stand, the verdict's claims and the check.
    """
    call, answer = draft.call, draft.call.result.text.strip()
    claims = cited_claims(answer, supplied)
    check: dict[str, Any] = {"claims": len(claims), "draft_support": support_share(claims)}
    if unsupported := [c for c in claims if not c.supported]:
        problems = [(c.text, [format_chunk(supplied[i]) for i in c.cited], c.missing)
                    for c in unsupported]  # fmt: skip
        turns: list[ChatMessage] = [
            {"role": "assistant", "content": neutralise(answer, supplied)},
            {"role": "user", "content": prompt.revision_turn(problems, supplied)},
        ]
        revised = await call_model(
            ctx,
            node=agents.JUDGE,
            backend=backend,
            contents=[*contents, draft.transcript.section()],
            compose=lambda sections: [*draft.compose(sections), *turns],
            question=state["question"],
            retrieval_profile=retrieval_profile,
            tools=draft.tools,
            tool_choice="none" if draft.tools else None,
        )
        draft.budgets.append(revised.report_dict)
        text, seen = revised.result.text.strip(), shown(revised, draft.transcript)
        # A small judge may echo the check instead of fixing the draft: keep the draft then.
        if (
            text
            and not prompt.echoes_check(text)
            and (support_share(cited_claims(text, seen)) or 0.0) >= (check["draft_support"] or 0.0)
        ):
            call, answer, supplied = revised, text, seen
            check["revised"] = True
        else:
            check["revised"] = False
            notes.append("the judge's fix of its unsupported claims was not used (empty, "
                         "an echo of the check, or less supported than the draft)")  # fmt: skip
        claims = cited_claims(answer, supplied)
        if dropped := [c for c in claims if not c.supported]:
            kept_answer = drop_claims(answer, dropped)
            if kept_answer != answer:
                notes.append(
                    f"dropped {len(dropped)} cited claim(s) their chunks do not support: "
                    + "; ".join(f"{c.text.strip()!r} ({', '.join(c.missing)})" for c in dropped)
                )
                check["dropped"] = [c.text.strip() for c in dropped]
                answer = kept_answer
                claims = cited_claims(answer, supplied)
    return call, answer, supplied, claims, check
