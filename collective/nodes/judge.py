"""judge: the verdict: the judge's own answer from the KB, checked, weighed with the members'.

The judge reads the council's shared root (rules, conversation, KB, question) and writes its own
answer from the KB, as one call of its model would (with tool rounds where `judge_tools` is on).
It is not shown the members' answers: a small judge merging them made the answer worse than its
own model alone. The draft is cleaned of echoes (`prompts.judge.clean`), and each of its claims
is checked against the chunks as the judge was shown them (`collective.verdict.support`); failed
claims get one fix call, then are retagged or dropped. Then every answer (the judge's and the
members', each checked against the chunks its own prompt showed) is reduced to its answer to the
question, and the one most give among those the KB supports stands
(`collective.verdict.agreement.decide`). The verdict is its direct answer, then the chunks' own
sentences (`collective.verdict.lines`), or a ranked lead from the KB's figures of the property a
"which is highest" question asks (`collective.verdict.comparison`). See docs/verdicts.md.

The judge's own answer is kept in the state (`own`). In the council graph the `draft` node
writes it beside the specialists; `collective.modes.run_arms` makes it once and hands it to
every mode that rules on it (it is also `single`'s answer).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langgraph.runtime import Runtime

from collective import agents, environment
from collective.budget.assembly import SectionContent, Sections, chunks_section, text_section
from collective.budget.counting import ChatMessage, TokenCounter
from collective.budget.trimming import Fitted, Scored, select_chunks, share_fairly
from collective.errors import BackendError, BackendUnavailable, BudgetError, InvalidResponse
from collective.graph.context import CouncilContext, open_knowledge
from collective.graph.state import CouncilState, Proposal, answered, applied_profile
from collective.kb.citations import check_citations, neutralise, tag
from collective.kb.embeddings import embedder_for
from collective.kb.evidence import council_evidence
from collective.kb.names import KbVocabulary, chunk_vocabulary
from collective.kb.store import Chunk
from collective.kb.tools import ToolResult, VerificationTools
from collective.kb.vocabulary import Vocabulary, VocabularySource
from collective.models.base import Backend, ChatResult, ToolCall
from collective.models.confidence import confidence_fields
from collective.models.refs import resolve_backend
from collective.nodes.chunks import chunks_from_state, scored_chunks
from collective.nodes.model_call import ModelCall, NodeProgress, call_model, emit
from collective.nodes.review import aggregate_rankings
from collective.prompts import council
from collective.prompts import judge as prompt
from collective.telemetry import record_fallback, record_tool_call
from collective.verdict.agreement import (
    NO_ANSWER,
    OFF_QUESTION,
    Asked,
    Checked,
    agreed_lead,
    check_answer,
    decide,
    not_stated,
)
from collective.verdict.comparison import Ranking, compared_figures, rank
from collective.verdict.entailment import entailment_for
from collective.verdict.lines import (
    direct_answer,
    first_of_thing,
    ordered,
    readable,
    said_once,
    supporting_lines,
    unlabelled,
    wanted_lines,
)
from collective.verdict.shown import ShownVocabulary
from collective.verdict.support import (
    Claim,
    Shown,
    Similar,
    as_shown,
    check_claims,
    mark_fixed,
    plain,
    shown_whole,
    support_share,
)

__all__ = ["draft", "judge", "seen_chunks"]


class ToolTranscript:
    """The judge's tool rounds so far: the `tools` budget section and the messages it implies.

    The section holds the tool schemas (sent beside the messages) and every tool result; results
    share what the schemas leave fairly, and one over its share keeps its chunks in order while
    they fit, with the usual trim header. `messages()` replays the rounds with the results
    exactly as last fitted; `shown` is what each chunk of them showed.
    """

    def __init__(
        self, rounds: Sequence[Sequence[tuple[ToolCall, ToolResult]]], schemas: list[dict]
    ) -> None:
        self.rounds = rounds
        self.schema_text = json.dumps(schemas) if schemas else ""
        self.fitted = self.results
        self.shown = {key: text for r in self._each for key, text in r.parts if key}
        """Each chunk the fitted results show, with its rendering as shown (maybe cut)."""

    @property
    def _each(self) -> list[ToolResult]:
        return [result for calls in self.rounds for _, result in calls]

    @property
    def results(self) -> list[str]:
        """Every tool result, round by round, as the tools returned it."""
        return [result.text for result in self._each]

    def section(self) -> SectionContent:
        """The `tools` section content."""
        return SectionContent("tools", self._fit)

    def _fit(self, counter: TokenCounter, limit: int) -> Fitted:
        schema = counter.count(self.schema_text)
        each = self._each
        shares = share_fairly(counter, self.results, max(0, limit - schema), keep="start")
        parts = [
            _fit_result(counter, result, share.tokens) if share.trimmed else share
            for result, share in zip(each, shares, strict=True)
        ]
        self.fitted = [p.text for p in parts]
        self.shown = {
            key: text
            for result, part in zip(each, parts, strict=True)
            for key, text in (part.shown if part.trimmed else result.parts)
            if key
        }
        used = schema + sum(p.tokens for p in parts)
        return Fitted(self.schema_text, used, trimmed=any(p.trimmed for p in parts))

    def compose(
        self, base: Callable[..., list[ChatMessage]]
    ) -> Callable[[Sections], list[ChatMessage]]:
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


def _fit_result(counter: TokenCounter, result: ToolResult, limit: int) -> Fitted:
    """A tool result over its share: its parts in order while they fit (the first cut, not lost).

    Each chunk's rendering, as far as it is shown, is in `Fitted.shown`.
    """
    parts = enumerate(result.parts)
    return select_chunks(
        counter, [Scored(k, text, -i, tag(k) if k else "") for i, (k, text) in parts], limit
    )


def run_tools(
    tools: VerificationTools, counter: TokenCounter, calls: Sequence[ToolCall], n_ctx: int
) -> list[tuple[ToolCall, ToolResult, int]]:
    """Run one round's tool calls (blocking: the KB, and counting may be HTTP): results, tokens.

    A result is counted up to the judge's context `n_ctx` (`TokenCounter.within_reach`): a
    longer one (a huge chunk in an old KB) reports the count of that cut, already too many.
    """
    results = []
    for call in calls:
        result = tools.run(call.name, call.arguments)
        tokens = counter.count(counter.within_reach([result.text], n_ctx)[0])
        record_tool_call(call.name, call.arguments, len(result.text), tokens)
        results.append((call, result, tokens))
    return results


async def draft(state: CouncilState, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """The judge's own answer, written while the specialists answer: it reads none of theirs.

    On a backend that batches (the in-process engine, llama-server's slots) it decodes with
    the members, and reads the root they share. The judge node weighs it once they are done; a
    draft whose judge fails is left to the judge node, which tries again and then the fallbacks.
    """
    ctx = runtime.context
    backend = resolve_backend(ctx.judges[0])
    progress = NodeProgress(agents.JUDGE, backend.model)  # the judge's row runs from here on
    try:
        own = await (await _ruling(state, ctx, backend, [])).own_answer()
    except (BackendError, BudgetError) as error:  # never cancels the specialists beside it
        failed = f"the judge's own answer beside the specialists failed ({type(error).__name__})"
        return {"notes": [*state.get("notes", []), f"{failed}: {error}; the judge tried again"]}
    timings = {f"{agents.DRAFT}_ms": (time.perf_counter() - progress.started) * 1000}
    return {"own": own.to_state(), "budgets": own.budgets, "timings": timings}


async def _ruling(
    state: CouncilState, ctx: CouncilContext, backend: Backend, members: list[Proposal]
) -> _Ruling:
    """One judge backend's ruling on `members`' answers (none: its own answer alone)."""
    retrieved = chunks_from_state(state.get("chunks", []))
    chunks = {c.id: c for c in retrieved}
    headings = [c.heading for c in retrieved]
    vocabulary, compared = await asyncio.to_thread(_vocabulary, ctx, retrieved, state["question"])
    chunks.update((c.id, c) for c in compared)  # the KB's figures retrieval did not bring
    checked = [_check_member(p, chunks, headings, vocabulary) for p in members]

    def contents(verify: bool) -> list[SectionContent]:
        return [
            text_section("system", prompt.SYSTEM.format(k=ctx.k)),
            text_section("conversation_summary", state.get("conversation", ""), keep="end"),
            chunks_section("kb_chunks", scored_chunks(retrieved)),
            council.task_section(prompt.task_text(state["question"], verify=verify)),
        ]

    aggregate = aggregate_rankings(state.get("rankings", []), members)
    seen = frozenset(i for p in members for i in _seen(p, chunks))
    return _Ruling(state, ctx, backend, contents, chunks, headings, checked, aggregate,
                   vocabulary, seen, tuple(c.id for c in compared))  # fmt: skip


def _vocabulary(
    ctx: CouncilContext, retrieved: Sequence[Chunk], question: str
) -> tuple[Vocabulary, list[Chunk]]:
    """The KB's names and figures: the store's own where it learned them, else the chunks'.

    Only the figures of the chunks retrieved count, and, where the question ranks things it
    names, the chunks that state the figure each is ranked by (`compared_figures`), returned
    beside it (read from the KB where retrieval did not bring them): so every figure a
    comparison leads with is of a chunk the verdict cites (the store's names all count); so too
    the figures of the property asked of the things the question names or describes by their
    use (`Asked.described`). What the store's vocabulary would read from the KB later is read
    here (`KbVocabulary.loaded`).
    """
    store = ctx.knowledge if ctx.knowledge is not None else open_knowledge(ctx)
    get = store.get
    if isinstance(store, VocabularySource):
        whole = store.vocabulary()
        by_id = {c.id: c for c in retrieved}
        figures = [*compared_figures(question, whole), *_asked_figures(question, by_id, whole)]
        wanted = dict.fromkeys(f.chunk_id for f in figures)
        compared = [c for i in wanted if (c := by_id.get(i) or get(i)) is not None]
        ids = list(dict.fromkeys([*by_id, *(c.id for c in compared)]))
        loaded = whole.loaded(ids) if isinstance(whole, KbVocabulary) else whole
        return ShownVocabulary(loaded, ids), compared
    return chunk_vocabulary(retrieved), []


def _asked_figures(question: str, retrieved: Mapping[str, Chunk], whole: Vocabulary) -> list[Any]:
    """The KB's figures of the property asked of the things the question names or describes."""
    asked = Asked.read(question, whole, shown_whole(retrieved).values())
    return whole.figures(asked.property, asked.things) if asked.property and asked.things else []


async def judge(state: CouncilState, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """Write the verdict, check its claims, and resolve its citations against the chunks shown."""
    ctx = runtime.context
    members = answered(state.get("proposals", []))  # the quorum node checked their number
    refs = ctx.judges
    failures: list[str] = []
    for n, ref in enumerate(refs, 1):
        backend = resolve_backend(ref)
        progress = NodeProgress(agents.JUDGE, backend.model)
        try:
            ruling = await _ruling(state, ctx, backend, members)
            out = await ruling.rule()
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
        out["timings"] = progress.done(out.pop("call"))
        out["ranking_aggregate"] = ruling.ranking
        out["evidence"] = council_evidence(ctx.evidence, members)
        out["notes"] = [*state.get("notes", []), *failures, *out["notes"]]
        return out
    raise AssertionError("unreachable: refs is never empty")


def _confidence(reported: Any) -> float | None:
    """A proposal's confidence as a vote's weight in 0-1, where its backend reported one.

    A share as it is; log-probabilities (`{"mean": ...}`, natural log per token, as the
    backends that report them give it) as the geometric mean of the tokens' probabilities.
    """
    if isinstance(reported, Mapping):
        reported = reported.get("mean")
        return math.exp(min(0.0, reported)) if isinstance(reported, int | float) else None
    return float(reported) if isinstance(reported, int | float) else None


def _seen(proposal: Proposal, chunks: Mapping[str, Chunk]) -> list[str]:
    """The chunks a member's prompt showed (all retrieved for a proposal that does not say)."""
    seen = (proposal.get("evidence") or {}).get("seen")
    return [i for i in (list(chunks) if seen is None else seen) if i in chunks]


def _check_member(
    proposal: Proposal, chunks: Mapping[str, Chunk], headings: list[str], vocabulary: Vocabulary
) -> Checked:
    """A member's answer checked against the chunks its prompt showed, as far as it showed them."""
    shown = shown_whole(chunks, ids=_seen(proposal, chunks))
    for key, rendered in ((proposal.get("evidence") or {}).get("cut") or {}).items():
        if key in shown:
            shown[key] = as_shown(chunks[key], rendered)
    confidence = _confidence(proposal.get("confidence"))
    return check_answer(
        proposal["member"],
        proposal["text"],
        shown,
        names=headings,
        vocabulary=vocabulary,
        confidence=confidence,
    )


@dataclass
class OwnAnswer:
    """The judge's own answer from the KB, checked (and fixed), before it is weighed."""

    judge: str
    """The backend that wrote it (its spec)."""
    question: str
    text: str
    """The cleaned (or fixed) draft, as the check read it."""
    claims: list[Claim]
    shown: dict[str, Shown]
    """The chunks as its prompt showed them."""
    check: dict[str, Any]
    """The claim check's figures (`claim_check` in the output)."""
    notes: list[str]
    budgets: list[dict[str, Any]]
    """The budget reports of its calls."""
    tool_calls: list[dict[str, Any]]
    call: ModelCall | None = None
    """Its last call (None once read back from the state)."""
    confidence: dict[str, Any] = dataclasses.field(default_factory=dict)
    """How sure the model was of its draft (`confidence_fields`: `confidence`, or None and the
    `confidence_note` saying why)."""

    def to_state(self) -> dict[str, Any]:
        """Plain data for the graph's state (`own`): everything but the call."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "call"}
        out["claims"] = [dataclasses.asdict(c) for c in self.claims]
        out["shown"] = {i: dataclasses.asdict(chunk) for i, chunk in self.shown.items()}
        return out

    @classmethod
    def from_state(
        cls, data: Mapping[str, Any] | None, judge: str, state: Mapping[str, Any]
    ) -> OwnAnswer | None:
        """The own answer the state holds if `judge` wrote it for this question, else None."""
        if not data or data.get("judge") != judge or data.get("question") != state["question"]:
            return None
        claims = [
            Claim(**{**c, "cited": tuple(c["cited"]), "missing": tuple(c["missing"])})
            for c in data["claims"]
        ]
        shown = {i: Shown(**chunk) for i, chunk in data["shown"].items()}
        fields = {k: v for k, v in data.items() if k not in ("claims", "shown")}
        return cls(**fields, claims=claims, shown=shown)


@dataclass
class _Draft:
    """The judge's calls up to its draft verdict, and how the draft's prompt was made."""

    call: ModelCall
    """The last call: its answer is the draft verdict."""
    transcript: ToolTranscript
    contents: list[SectionContent]
    compose: Callable[[Sections], list[ChatMessage]]
    tools: list[dict[str, Any]] | None
    """The tool schemas the draft's call offered."""
    tool_log: list[dict[str, Any]]
    budgets: list[dict[str, Any]]


@dataclass
class _Ruling:
    """One judge backend's ruling: its own answer (tools, draft, check, fix), then the selection."""

    state: CouncilState
    ctx: CouncilContext
    backend: Backend
    contents: Callable[[bool], list[SectionContent]]
    chunks: Mapping[str, Chunk]
    headings: list[str]
    members: list[Checked]
    ranking: list[dict[str, Any]]
    """The peer review's mean ranks (`aggregate_rankings`), empty without a review round."""
    vocabulary: Vocabulary
    """The KB's names and figures (`_vocabulary`)."""
    seen: frozenset[str] = frozenset()
    """The chunks some member's prompt showed."""
    compared: tuple[str, ...] = ()
    """The chunks that state the figures a ranking of the question's things reads (some read
    from the KB: retrieval did not bring them, or no prompt showed them)."""

    @property
    def scores(self) -> dict[str, float]:
        """Each retrieved chunk's retrieval score."""
        return {i: chunk.score for i, chunk in self.chunks.items()}

    async def rule(self) -> dict[str, Any]:
        own = OwnAnswer.from_state(self.state.get("own"), self.backend.spec, self.state)
        made = own is None
        if own is None:
            own = await self.own_answer()
        notes = list(own.notes)
        _stage("weighing the members' answers against its own" if self.members else "ruling")
        question = self.state["question"]
        verdict = check_answer(agents.JUDGE, own.text, own.shown, names=self.headings,
                               claims=own.claims, vocabulary=self.vocabulary)  # fmt: skip
        # what the council was shown: the judge's prompt (as shown), each member's, and the KB's
        # figures of the things a ranking compares (`compared`)
        seen = [
            i for i in self.chunks if i not in own.shown and (i in self.seen or i in self.compared)
        ]
        every = {**own.shown, **shown_whole(self.chunks, ids=seen)}
        asked = Asked.read(question, self.vocabulary, shown_whole(self.chunks).values())
        ranks = {row["member"]: row["mean_rank"] for row in self.ranking}
        decision = decide(asked, [verdict, *self.members], self.vocabulary, ranks)
        notes += [decision.why] if decision.why else []
        if decision.off_question:
            notes.append("not counted, supported answers to another question: "
                         + "; ".join(decision.off_question))  # fmt: skip
        stands = decision.stands
        check = {
            **own.check,
            "agreement": decision.votes,
            "selected": stands.who if stands is not None else "split",
            "off_question": decision.off_question,
        }
        if stands is None:  # an even split: each side's line, with its support
            sides = [c for side in decision.split for c in side.claims if c.status != "dropped"]
            final, text = sides, decision.text
            supplied = {**own.shown, **shown_whole(self.chunks, ids=_cited(sides))}
        else:
            text, final, supplied = self._stood(stands, verdict, own, asked, every, check, notes)
        text = text.strip()
        _emit_shown(supplied, self.chunks)  # what the verdict's tags resolve to
        citations, unknown = check_citations(text, supplied)
        return {
            # a tag no shown chunk backs stays reported, but never reads as a citation
            "answer": neutralise(text, list(supplied)),
            "citations": citations,
            "unknown_citations": unknown,
            "citation_support": support_share(final),
            "claims": [c.to_dict() for c in final],
            "claim_check": check,
            "budgets": own.budgets if made else [],
            "tool_calls": own.tool_calls,
            "notes": notes,
            "own": own.to_state(),
            "call": own.call if made else None,
            **own.confidence,
        }

    def _stood(
        self,
        stands: Checked,
        verdict: Checked,
        own: OwnAnswer,
        asked: Asked,
        every: Mapping[str, Shown],
        check: dict[str, Any],
        notes: list[str],
    ) -> tuple[str, list[Claim], dict[str, Shown]]:
        """The verdict where `stands` stands: its lines, or the KB's where it answers nothing.

        `verdict` is the judge's own answer as checked; `every` the chunks the council was shown.
        """
        final = own.claims if stands is verdict else list(stands.claims)
        supplied = own.shown if stands is verdict else _member_shown(stands, self.chunks)
        text = stands.text
        if text in (NO_ANSWER, OFF_QUESTION) and (
            held := _figures_held(asked, self.vocabulary, every)
        ):
            # no answer gave it, but a chunk shown states the figure asked: quote it
            text, final, supplied = self._held(held, asked, every, final, supplied)
            notes.append(f"no answer stated the {asked.property} asked; the chunk's own words")
        answered = text not in (NO_ANSWER, OFF_QUESTION)
        vocabulary = ShownVocabulary(self.vocabulary, every)  # figures of chunks shown only
        ranked = None if asked.unknown else rank(asked.question, vocabulary,
                                                 _things(every, vocabulary))  # fmt: skip
        # no answer answers, but retrieval's first by a wide margin is of the thing asked
        first = None if answered or asked.unknown else first_of_thing(
            asked, every, self.scores, self.vocabulary)  # fmt: skip
        if ranked is not None or (answered and not asked.unknown) or first is not None:
            # a ranking the KB's figures settle needs no answer to have been supported
            shown_to = frozenset(own.shown) | self.seen  # the council's prompts showed
            agreed = agreed_lead(asked, stands, [verdict, *self.members], every,
                                 self.vocabulary)  # fmt: skip
            said = self._lines(text if answered else "", final, supplied, every, vocabulary,
                               asked, ranked, check, notes, shown_to, agreed)  # fmt: skip
            if said[0].strip():
                text, final, supplied = said
                if first is not None and ranked is None:
                    notes.append(f"no answer answered the question; {first}, retrieval's "
                                 "first by a wide margin, in its own words")  # fmt: skip
        if text not in (NO_ANSWER, OFF_QUESTION) and not asked.unknown:
            lead = text.strip().split("\n", 1)[0]  # the answer's lead speaks of it, or none
            if unspoken := asked.unspoken(lead, supplied, self.vocabulary):
                text, final, supplied = self._wanted(final, supplied, every, asked, unspoken,
                                                     notes)  # fmt: skip
        return text, final, supplied

    def _lines(
        self,
        text: str,
        claims: Sequence[Claim],
        supplied: Mapping[str, Shown],
        every: Mapping[str, Shown],
        vocabulary: Vocabulary,
        asked: Asked,
        ranked: Ranking | None,
        check: dict[str, Any],
        notes: list[str],
        shown_to: frozenset[str] = frozenset(),
        agreed: str | None = None,
    ) -> tuple[str, list[Claim], dict[str, Shown]]:
        """The verdict's lines: a ranked lead where the question ranks, else the chunks' words.

        `vocabulary` is the KB's, its figures those of the chunks shown (`every`); `agreed` the
        chunk more answers lead with than the standing one (`agreed_lead`).
        """
        if ranked is None:
            check["lines"] = "quoted"
            if agreed is not None:
                check["agreed_lead"] = agreed
                notes.append(f"the verdict leads with {agreed}: more answers lead with it")
            return self._in_kb_words(text, claims, supplied, every, vocabulary, asked, agreed)
        # the KB's figures, not the judge's arithmetic, name the one asked for
        lead = ranked.lead
        check["extreme"] = {"direction": ranked.direction, "property": ranked.measure,
                            "compared": len(ranked.order), "negated": ranked.negated,
                            "thing": lead.thing}  # fmt: skip
        notes.append(f"the verdict leads with the {ranked.direction} {ranked.measure} of the "
                     f"{len(ranked.order)} things the KB gives one for")  # fmt: skip
        if fetched := [f.chunk_id for f in ranked.order if f.chunk_id not in shown_to]:
            notes.append(f"{len(fetched)} of its figures read from the KB: no prompt of the "
                         "council showed their chunks")  # fmt: skip
        direct = unlabelled(direct_answer(text), [c.heading for c in every.values()])
        direct = _agreeing(direct, ranked, vocabulary)
        lines = [ranked.line(), direct, *(f"- {o}" for o in ranked.others())]
        ids = [f.chunk_id for f in ranked.order]
        quotes = [Claim(line, (f.chunk_id,), "supported", "the KB's figure, ranked")
                  for line, f in zip([ranked.line(), *ranked.others()], ranked.order,
                                     strict=True)]  # fmt: skip
        said = [c for c in claims if c.supported and direct and plain(c.text) in direct]
        final = [*(c for c in claims if c.status == "dropped"), *said, *quotes]
        shown = {**supplied, **shown_whole(self.chunks, ids=ids)}
        return "\n".join(line for line in lines if line), final, shown

    def _held(
        self,
        held: Sequence[Any],
        asked: Asked,
        every: Mapping[str, Shown],
        claims: Sequence[Claim],
        supplied: Mapping[str, Shown],
    ) -> tuple[str, list[Claim], dict[str, Shown]]:
        """The verdict as the KB's figures `held` of the property asked, quoted.

        Where the question named its thing by its use, the sentence that says so follows.
        """
        hops = [d for d in asked.described if d.chunk_id in every]
        quoted = [(readable(f.text), f.chunk_id, "the KB's figure, quoted") for f in held]
        quoted += [(d.sentence, d.chunk_id, "quoted: what the question describes the thing by")
                   for d in hops]  # fmt: skip
        lines = [f"{'- ' if n else ''}{line} [KB#{i}]" for n, (line, i, _) in enumerate(quoted)]
        final = [*(c for c in claims if c.status == "dropped"),
                 *(Claim(line, (i,), "supported", why) for line, i, why in quoted)]  # fmt: skip
        ids = [i for _, i, _ in quoted]
        return "\n".join(lines), final, {**supplied, **shown_whole(self.chunks, ids=ids)}

    def _wanted(
        self,
        claims: Sequence[Claim],
        supplied: Mapping[str, Shown],
        every: Mapping[str, Shown],
        asked: Asked,
        unspoken: Iterable[str],
        notes: list[str],
    ) -> tuple[str, list[Claim], dict[str, Shown]]:
        """The verdict where its lead says nothing of the property asked (`Asked.wanted`).

        The chunks' sentences that state it, else a lead that the KB does not, with those that
        speak of it in part ("conducts heat away so fast" for a thermal conductivity).
        """
        states, quoted = wanted_lines(asked, every, self.vocabulary, unspoken)
        title = next(t.title for t in self.vocabulary.things() if t.key == asked.things[0])
        lead = [] if states else [not_stated(asked.wanted, title)]
        found = "the chunk's sentence that states it" if states else "the KB states none"
        notes.append(f"the lead spoke not of the {asked.wanted} asked; {found}")
        lines = [*lead, *(f"- {q}" if lead or n else q for n, q in enumerate(quoted))]
        quotes = [Claim(q, tuple(i for i in every if f"[KB#{i}]" in q), "supported",
                        "quoted: the chunk's own sentence") for q in quoted]  # fmt: skip
        ids = [i for q in quotes for i in q.cited]
        supplied = {**supplied, **{i: every[i] for i in ids if i in every}}  # as shown
        dropped = [c for c in claims if c.status == "dropped"]
        return "\n".join(readable(line) for line in lines), [*dropped, *quotes], supplied

    def _in_kb_words(
        self,
        text: str,
        claims: Sequence[Claim],
        supplied: Mapping[str, Shown],
        every: Mapping[str, Shown],
        vocabulary: Vocabulary,
        asked: Asked,
        agreed: str | None = None,
    ) -> tuple[str, list[Claim], dict[str, Shown]]:
        """The direct answer (checked), then the chunks' own sentences that bear on the question.

        `agreed`: the chunk more answers lead with than the direct answer (`agreed_lead`).
        Returns the verdict's text, its claims (the dropped ones, the direct answer's as
        checked, then each quoted line's) and the chunks it may cite.
        """
        direct = direct_answer(text)
        said = plain(direct)  # a claim written as a bullet is said as the direct answer
        kept = [c for c in claims if c.status != "dropped" and plain(c.text).strip(" -*•") in said]
        direct = unlabelled(direct, [c.heading for c in every.values()])
        cited = _cited(c for c in claims if c.supported)
        scores = self.scores
        quoted = supporting_lines(asked, every, scores, cited, vocabulary, said=direct,
                                  agreed=agreed)  # fmt: skip
        direct, quoted = said_once(direct, quoted, vocabulary)
        kept = kept if direct else []
        lines = ordered(asked, direct, quoted, scores, vocabulary, agreed)
        lines = [*lines[:1], *(f"- {line}" for line in lines[1:])]
        ids = _cited(Claim(line, (), "supported", "") for line in quoted)
        supplied = {**supplied, **{i: every[i] for i in every if i in ids}}  # as shown
        quotes = [Claim(line, tuple(i for i in every if f"[KB#{i}]" in line), "supported",
                        "quoted: the chunk's own sentence") for line in quoted]  # fmt: skip
        dropped = [c for c in claims if c.status == "dropped"]  # reported, never shown
        return "\n".join(readable(line) for line in lines), [*dropped, *kept, *quotes], supplied

    async def own_answer(self) -> OwnAnswer:
        """The judge's own answer from the KB: its calls, cleaned, checked and fixed."""
        notes: list[str] = []
        _stage("writing its own answer from the KB")
        tools = None
        if self.ctx.judge_tools and self.backend.supports_tools:
            knowledge = await asyncio.to_thread(open_knowledge, self.ctx)
            tools = VerificationTools(knowledge, applied_profile(self.state))
        elif self.ctx.judge_tools:
            notes.append(
                f"the judge ran without tools: {self.backend.spec} has no native tool calling"
            )
        draft = await self._tool_rounds(tools, notes)
        entail = None
        if self.ctx.entailment == "judge":
            entail = await asyncio.to_thread(entailment_for, self.backend)
        shown = self._shown(draft.call, draft.transcript, tools)
        _emit_shown(shown, self.chunks)
        text = self._clean(draft.call.result, draft.transcript.results)
        _stage("checking its claims against the chunks")
        started = time.perf_counter()
        claims = await asyncio.to_thread(self._check, text, shown, entail)
        check: dict[str, Any] = {"claims": len(claims), "draft_support": _share(claims)}
        check["check_ms"] = (time.perf_counter() - started) * 1000
        call = draft.call
        if any(c.status == "dropped" for c in claims):
            _stage("fixing its unsupported claims")
            fixed = await self._fix(draft, text, claims, shown, notes)
            if fixed is not None:
                fixed_call, fixed_text, fixed_shown = fixed
                started = time.perf_counter()
                fixed_claims = mark_fixed(
                    await asyncio.to_thread(self._check, fixed_text, fixed_shown, entail), claims
                )
                check["check_ms"] += (time.perf_counter() - started) * 1000
                better = sum(c.supported for c in fixed_claims) >= sum(c.supported for c in claims)
                if fixed_text and not prompt.echoes_check(fixed_text) and better:
                    call, text, shown, claims = fixed_call, fixed_text, fixed_shown, fixed_claims
                    _emit_shown(shown, self.chunks)
                    check["revised"] = True
                else:
                    check["revised"] = False
                    notes.append(
                        "the judge's fix of its unsupported claims was not used (empty, an echo "
                        "of the check, or less supported than the draft)"
                    )
        dropped = [c for c in claims if c.status == "dropped"]
        if dropped:
            check["dropped"] = [c.text.strip() for c in dropped]
            notes.append(
                f"dropped {len(dropped)} claim(s) no shown chunk supports: "
                + "; ".join(f"{c.text.strip()!r} ({c.reason})" for c in dropped)
            )
        if entail is None and any("entailment" in c.reason for c in claims):
            notes.append(
                "claims that numbers and names could not settle were dropped (no entailment: "
                f"the setting entailment = judge, {environment.ENTAILMENT_ENV}=judge, asks the "
                "judge's model where it runs in process)"
            )
        check["retagged"] = sum(c.status == "retagged" for c in claims)
        return OwnAnswer(
            judge=self.backend.spec,
            question=self.state["question"],
            text=text,
            claims=claims,
            shown=shown,
            check=check,
            notes=[*notes, *call.result.warnings],
            budgets=draft.budgets,
            tool_calls=draft.tool_log,
            call=call,
            confidence=confidence_fields(
                draft.call.result.confidence, draft.call.result.confidence_note
            ),
        )

    def _clean(self, result: ChatResult, tool_output: Sequence[str]) -> str:
        instructions = [*prompt.task_text(self.state["question"], verify=True), prompt.REVISE]
        cut = result.finish_reason == "length"
        return prompt.clean(
            result.text, instructions, tool_output, self.headings, prompt.LINES, cut=cut
        )

    def _check(self, text: str, shown: Mapping[str, Shown], entail: Any) -> list[Claim]:
        return check_claims(text, shown, entail, self.headings, _similarity(self.ctx))

    def _shown(
        self, call: ModelCall, transcript: ToolTranscript, tools: VerificationTools | None
    ) -> dict[str, Shown]:
        """The chunks the call's prompt showed, as it showed them (a tool's too).

        The KB section's fit hands over each chunk's text as shown (`Fitted.shown`); its
        rendering (`format_chunk`: tag, score, heading) is ours to take off, not read back.
        """
        section = call.prompt.sections.get("kb_chunks")
        shown: dict[str, Shown] = {}
        for key, text in section.shown if section else ():
            if (chunk := self.chunks.get(key)) is not None:
                shown[key] = as_shown(chunk, text)
        if tools:
            for key, text in transcript.shown.items():
                if (chunk := tools.fetched.get(key)) is not None:
                    shown[key] = as_shown(chunk, text)
        return shown

    async def _tool_rounds(self, tools: VerificationTools | None, notes: list[str]) -> _Draft:
        """The judge's calls up to its draft verdict: tool rounds while tools are offered.

        A note is added for a tool call that could not be parsed.
        """
        ctx, backend = self.ctx, self.backend
        counter = await backend.token_counter()
        rounds: list[list[tuple[ToolCall, ToolResult]]] = []
        tool_log: list[dict[str, Any]] = []
        budgets: list[dict[str, Any]] = []
        usable = tools is not None
        for round_number in range(1, ctx.tool_rounds + 2):
            # The last round offers no tools, so the loop always ends with a verdict.
            offer = tools if usable and round_number <= ctx.tool_rounds else None
            transcript = ToolTranscript(rounds, offer.schemas if offer else [])
            contents = [*self.contents(bool(offer) and not rounds), transcript.section()]
            compose = transcript.compose(prompt.compose)
            try:
                call = await call_model(
                    ctx,
                    node=agents.JUDGE,
                    backend=backend,
                    contents=contents,
                    compose=compose,
                    question=self.state["question"],
                    retrieval_profile=applied_profile(self.state),
                    tools=offer.schemas if offer else None,
                    output_cap=prompt.MAX_TOKENS,
                    # The first round checks for sure where the backend can force a call.
                    tool_choice="required" if offer and not rounds else None,
                )
            except InvalidResponse as error:
                if not offer:
                    raise
                # A model that cannot produce a parseable tool call still owes a verdict.
                notes.append(f"the judge's tool call failed, ruling without tools: {error}")
                usable = False
                continue
            budgets.append(call.report_dict)
            if not (offer and call.result.tool_calls):
                schemas = offer.schemas if offer else None
                return _Draft(call, transcript, contents, compose, schemas, tool_log, budgets)
            offer.shown.update(call.prompt.kept("kb_chunks"))
            results = await asyncio.to_thread(
                run_tools, offer, counter, call.result.tool_calls, call.report.n_ctx
            )
            rounds.append([(tool_call, result) for tool_call, result, _ in results])
            tool_log += _logged(results, round_number)
        raise AssertionError("unreachable: the last round offers no tools")

    async def _fix(
        self,
        draft: _Draft,
        text: str,
        claims: Sequence[Claim],
        shown: Mapping[str, Shown],
        notes: list[str],
    ) -> tuple[ModelCall, str, dict[str, Shown]] | None:
        """One call to fix the draft's failed claims; None when it could not be made.

        It reads on from the draft's own prompt (same sections and tools, then the draft and
        the check), so a server with a prompt cache computes only the check. The check quotes
        the nearest sentences of each failed claim's chunks as the judge was shown them.
        """
        problems = [
            (c.text, c.reason, nearest_sentences(c, shown)) for c in claims if not c.supported
        ]
        problems = [p for p in problems if p[0].strip()]
        turns: list[ChatMessage] = [
            {"role": "assistant", "content": neutralise(text, list(shown))},
            {"role": "user", "content": prompt.revision_turn(problems, list(shown))},
        ]
        try:
            revised = await call_model(
                self.ctx,
                node=agents.JUDGE,
                backend=self.backend,
                contents=draft.contents,
                compose=lambda sections: [*draft.compose(sections), *turns],
                question=self.state["question"],
                retrieval_profile=applied_profile(self.state),
                tools=draft.tools,
                tool_choice="none" if draft.tools else None,
                output_cap=prompt.MAX_TOKENS,
            )
        except BudgetError as error:
            notes.append(f"the judge's fix call did not fit its context, the draft stands: {error}")
            return None
        draft.budgets.append(revised.report_dict)
        fixed_shown = {**shown, **self._shown(revised, draft.transcript, None)}
        return revised, self._clean(revised.result, draft.transcript.results), fixed_shown


def _stage(stage: str) -> None:
    """Tell the stream what the judge does now (the live view's judge row, the page)."""
    emit({"type": "stage", "node": agents.JUDGE, "stage": stage})


def _emit_shown(shown: Mapping[str, Shown], chunks: Mapping[str, Chunk]) -> None:
    """Tell the stream the chunks as the judge's prompt showed them (the page shows a tag's)."""
    emit({"type": "shown", "node": agents.JUDGE, "chunks": seen_chunks(shown, chunks)})


def seen_chunks(shown: Mapping[str, Shown], chunks: Mapping[str, Chunk]) -> dict[str, Any]:
    """Each shown chunk's `heading`, `text` and `source`, and what its trim left out.

    `trimmed` is the rest of the chunk's body (as prompts render it) after the part the
    prompt showed; empty where the chunk was shown whole.
    """
    seen = {}
    for i, c in shown.items():
        whole = neutralise(chunks[i].text).strip() if i in chunks else c.text
        cut = whole[len(c.text) :] if len(c.text) < len(whole) else ""
        seen[i] = {"heading": c.heading, "text": c.text, "source": c.source, "trimmed": cut}
    return seen


def _similarity(ctx: CouncilContext) -> Similar | None:
    """Cosine similarity by the KB's embedding model (None without one)."""
    embedder = embedder_for(ctx.kb_embeddings)
    if embedder is None:
        return None

    def similar(claims: Sequence[str], passages: Sequence[str]) -> list[list[float]]:
        vectors = np.asarray(embedder.embed([*claims, *passages]), dtype=np.float64)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return (vectors[: len(claims)] @ vectors[len(claims) :].T).tolist()

    return similar


def _share(claims: Sequence[Claim]) -> float | None:
    """The share of all `claims` (the dropped ones too) that a chunk supports."""
    return sum(c.supported for c in claims) / len(claims) if claims else None


def nearest_sentences(claim: Claim, shown: Mapping[str, Shown], most: int = 2) -> list[str]:
    """The sentences of `claim`'s cited chunks (as shown) that share the most words with it."""
    words = set(claim.text.lower().split())
    sentences = [s for i in claim.cited if i in shown for s in shown[i].text.split(". ")]
    ranked = sorted(sentences, key=lambda s: -len(words & set(s.lower().split())))
    return [s[:300] for s in ranked[:most]]


def _cited(claims: Iterable[Claim]) -> list[str]:
    """The chunk ids `claims` cite, or, for a quoted line, the tags it carries."""
    out: dict[str, None] = {}
    for claim in claims:
        for i in claim.cited or re.findall(r"\[KB#([^\]\s]+)\]", claim.text):
            out.setdefault(i, None)
    return list(out)


def _things(shown: Mapping[str, Shown], vocabulary: Vocabulary) -> list[str]:
    """The things of the chunks shown, by key, in order."""
    return list(dict.fromkeys(t.key for i in shown if (t := vocabulary.thing_of(i)) is not None))


def _figures_held(asked: Asked, vocabulary: Vocabulary, shown: Mapping[str, Shown]) -> list[Any]:
    """The figures of the property asked of the one thing asked about, in the chunks shown."""
    if asked.unknown or not asked.property or len(asked.things) != 1:
        return []
    return [f for f in vocabulary.figures(asked.property, asked.things) if f.chunk_id in shown]


def _agreeing(direct: str, ranked: Ranking, vocabulary: Vocabulary) -> str:
    """The direct answer where it adds to the ranked lead without naming another thing first.

    A direct answer that names a thing compared but not the one the figures put first is left
    out, and so is one that only repeats the lead's figures.
    """
    named = {n.thing.key for n in vocabulary.named_in(direct)}
    compared = {f.thing for f in ranked.order}
    if named & compared and ranked.lead.thing not in named and not ranked.negated:
        return ""
    figures = re.findall(r"\d[\d.,]*", direct)
    shown = " ".join([ranked.line(), *ranked.others()])
    if figures and all(f in shown for f in figures):
        return ""
    return direct


def _member_shown(member: Checked, chunks: Mapping[str, Chunk]) -> dict[str, Shown]:
    return shown_whole(chunks, ids=[i for c in member.claims for i in c.cited if i in chunks])


def _logged(
    results: list[tuple[ToolCall, ToolResult, int]], round_number: int
) -> list[dict[str, Any]]:
    """The tool log's entries of one round, each also sent to the stream as it is logged."""
    entries = []
    for tool_call, result, tokens in results:
        entry = {
            "name": tool_call.name,
            "arguments": tool_call.arguments,
            "result_chars": len(result.text),
            "tokens": tokens,
            "round": round_number,
        }
        emit({"type": "tool_call", "node": agents.JUDGE, **entry})
        entries.append(entry)
    return entries
