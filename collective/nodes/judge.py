"""judge: weigh the proposals against the full KB view and rule, with checked citations."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from langgraph.runtime import Runtime

from collective.budget.assembly import chunks_section, labelled_section, text_section
from collective.budget.trimming import Scored
from collective.graph.context import CouncilContext
from collective.graph.state import CouncilState, Proposal
from collective.kb.citations import format_chunk, parse_citations, resolve
from collective.nodes.chunks import chunk_from_dict, scored_chunks
from collective.nodes.model_call import call_model, emit, resolve_backend
from collective.nodes.quorum import check_quorum
from collective.nodes.review import aggregate_rankings
from collective.prompts import judge as prompt

__all__ = ["judge"]


def evidence(proposals: list[Proposal], chunks: dict[str, Any]) -> list[Scored]:
    """The chunks the specialists cited, once each, most-cited first."""
    counts = Counter(i for p in proposals for i in p["citations"] if i in chunks)
    by_member: dict[str, list[str]] = {}
    for p in proposals:
        for i in p["citations"]:
            by_member.setdefault(i, []).append(p["member"])
    return [
        Scored(i, f"{format_chunk(chunks[i])}\n(cited by {', '.join(by_member[i])})", float(n))
        for i, n in counts.most_common()
    ]


async def judge(state: CouncilState, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """Synthesize the verdict and resolve its citations against the chunks supplied."""
    ctx = runtime.context
    answered = check_quorum(state.get("proposals", []), ctx)
    aggregate = aggregate_rankings(state.get("rankings", []), answered)
    backend = resolve_backend(ctx.judge)
    emit({"type": "progress", "node": "judge", "status": "running", "model": backend.model})
    started = time.perf_counter()
    chunks = {c["id"]: chunk_from_dict(c) for c in state.get("chunks", [])}
    ranking = "\n".join(
        f"Peer review: {row['member']} mean rank {row['mean_rank']:.2f} ({row['votes']} votes)"
        for row in aggregate
    )
    call = await call_model(
        ctx,
        role="judge",
        node="judge",
        backend=backend,
        contents=[
            text_section("system", prompt.SYSTEM),
            text_section("conversation_summary", state.get("conversation", ""), keep="end"),
            text_section(
                "task", prompt.task_text(state["question"], state.get("plan", ""), ranking)
            ),
            chunks_section("kb_chunks", scored_chunks(state.get("chunks", []))),
            labelled_section(
                "proposals", [(f"### {p['member']} ({p['model']})", p["text"]) for p in answered]
            ),
            chunks_section("evidence", evidence(answered, chunks)),
        ],
        compose=prompt.compose,
        question=state["question"],
        retrieval_profile=state.get("retrieval", {}).get("applied", "balanced"),
    )
    answer = call.result.text.strip()
    sections = call.prompt.sections
    supplied = {i: chunks[i] for i in (*sections["kb_chunks"].kept, *sections["evidence"].kept)}
    citations, unknown = resolve(parse_citations(answer), supplied)
    elapsed = (time.perf_counter() - started) * 1000
    emit(
        {
            "type": "progress",
            "node": "judge",
            "status": "done",
            "ms": elapsed,
            "tokens_in": call.report.prompt_tokens,
            "tokens_out": call.result.usage.completion_tokens,
        }
    )
    return {
        "answer": answer,
        "citations": citations,
        "unknown_citations": unknown,
        "budgets": [call.report_dict],
        "timings": {"judge_ms": elapsed},
        "ranking_aggregate": aggregate,
        "notes": list(call.result.warnings),
    }
