"""Budget-aware retrieval: lean, balanced, deep and auto profiles over any `KnowledgeStore`.

A profile is data (`ProfileSettings` in `PROFILES`): its candidate count, rewrite steps, trust
pass, injected range, whether it reranks, and its KB allocation factor; one pipeline runs them
all, so a new profile is one entry.

* lean: no rewrite, 10 candidates fetched, strict trust pass (score >= 0.35 and >= 60% of
  the best), 3-5 chunks injected.
* balanced (the default): one rewrite (keywords + synonyms from the `synonyms` setting's file, none
  packaged; or the caller's context for a follow-up), 30 candidates per query, standard trust
  pass (>= 0.2 and >= 40% of the best), 6-10 injected.
* deep: the whole rewrite chain below plus an optional LLM rewriter, 60 candidates per query,
  its best `RERANK_K` candidates reordered by a reranker (`collective.kb.rerank`: the embedded
  judge model's yes/no log-odds; the setting `rerank = "none"` turns it off), permissive trust pass
  (>= 0.1 and >= 20% of the best) that explains every drop, 8 up to the configured maximum
  (16) injected.

Deep's deterministic rewrite chain: `context` (follow-ups only: the query plus the caller's
context keywords), `keywords` (content words, filler dropped), `expand` (plus the synonym
table's words, when one is supplied), `relax` (phrase relaxation: each adjacent pair of
keywords searched on its own, so a chunk matching part of a long query can surface) and
`feedback` (pseudo-relevance feedback: the distinctive words of the best chunks so far).

Each query's lexical hits are fused: a chunk's score is its best weighted score over the
queries that found it (rewrites weigh less than the original) plus up to 0.1 for being found by
many of them. Hybrid: when the store also searches by embedding (`DenseStore`, the SQLite KB
with vectors), the query (plus the context's keywords for a follow-up) is searched densely too,
with the profile's candidate count; dense hits under cosine `DENSE_MIN` are dropped, and every
candidate of either side scores `DENSE_WEIGHT` x its calibrated cosine + the rest x its lexical
score (`convex`; reciprocal rank fusion measured worse on the tune split). The result says what
each side contributed (`sides`, `dense`). The trust pass keeps chunks above the profile's
thresholds; if fewer than the profile's minimum pass, the best remaining candidates above 0.05
top it up (with a diagnostic).

`auto` starts from the profile the query's wording suggests (lean for a few content words and
no other signal, deep for a follow-up that leans on the caller's context, else balanced) and any
latency bound; when that profile has an `escalate_to` (lean and balanced: deep) and its lexical
and dense rankings disagree at the top, or both tops are unsure (`disagreement`), it runs the
escalation instead: the reranker's cost is spent where the fast rankings disagree, not on a
question because it is long. It says why either way.

A store that knows its documents' names (`VocabularySource`, the SQLite KB) is read for the
things a query names, by any name ("Teflon", "super glue", "316"): where a name is not the
document's title, the query is also searched with the title in its place (at the original's
weight), and every candidate chunk of a named document scores `NAMED_BOOST` more.

A store that keeps chunk expansions (`collective.kb.expansion`) finds chunks by them too; a
store that could but has none says so in the diagnostics.

`max_inject` caps the injected count and `max_latency_ms` stops the rewrite chain once the
elapsed time passes it (then, and only then, the result can depend on machine speed).
Otherwise the same store, query and profile always give the same result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from collective import environment
from collective.errors import ConfigError
from collective.kb.chunking import MAX_CHUNK_CHARS
from collective.kb.profile_names import AppliedProfile, Profile
from collective.kb.sqlite_store import query_terms
from collective.kb.store import Chunk, DenseStore, KnowledgeStore, rank_chunks
from collective.kb.vocabulary import Vocabulary, VocabularySource
from collective.kb.words import STOPWORDS
from collective.telemetry import record_retrieval, retrieval_span

if TYPE_CHECKING:
    from collective.models.base import Backend

__all__ = [
    "BUILTIN_PROFILES",
    "DEFAULT_MAX_INJECT",
    "PROFILES",
    "Profile",
    "ProfileSettings",
    "RetrievalResult",
    "Reranker",
    "Rewriter",
    "backend_rewriter",
    "choose_profile",
    "NAMED_BOOST",
    "kb_allocation_factor",
    "register_profile",
    "retrieve",
]


Rewriter = Callable[[str, str], Sequence[str]]
"""An extra query rewriter for deep: `(query, context) -> rewritten queries`."""
Reranker = Callable[[str, Sequence[Chunk]], Sequence[float]]
"""Deep's reranker: `(query, candidates) -> one score each` (higher: answers it better)."""

DEFAULT_MAX_INJECT = 16
"""The configured maximum of injected chunks (deep's upper bound unless `max_inject` says less)."""


REWRITE_STEPS = ("context", "keywords", "expand", "relax", "feedback", "llm")
"""The rewrite steps a profile may list, in the order the chain runs them."""


@dataclass(frozen=True)
class ProfileSettings:
    """One retrieval profile, as data.

    How many candidates, which rewrites, whether it reranks, its trust pass and injected range,
    and its share of a node's KB allocation: adding a profile is one `PROFILES` entry (or
    `register_profile`).
    """

    fetch: int
    """Candidates fetched per query (lexically, and densely when the store can)."""
    steps: tuple[str, ...]
    """Rewrite steps (of `REWRITE_STEPS`) tried in order; `context` runs for follow-ups only,
    `llm` only with a rewriter; `max_rewrites` of those that apply are taken."""
    max_rewrites: int
    """Rewrite steps allowed (a step may issue several sub-queries)."""
    relative_trust: float
    """Keep chunks scoring at least this share of the best score ..."""
    absolute_trust: float
    """... and at least this score."""
    min_inject: int
    max_inject: int
    trust: str
    """Name of the trust pass, for reasons and diagnostics."""
    kb_factor: float
    """How the profile scales a node's KB-chunk allocation (within the node's budget)."""
    rerank: bool = False
    """Reorder the best `RERANK_K` candidates with the reranker."""
    explain: bool = False
    """Explain every drop and every rewrite step that added nothing."""
    takes_max_inject: bool = False
    """A caller's `max_inject` sets the upper bound even above `max_inject` (else it only caps)."""
    escalate_to: str | None = None
    """The profile `auto` moves to when this one's lexical and dense rankings disagree."""

    def __post_init__(self) -> None:
        unknown = [s for s in self.steps if s not in REWRITE_STEPS]
        if unknown:
            raise ConfigError(
                f"unknown rewrite step(s) {', '.join(unknown)}; use {', '.join(REWRITE_STEPS)}"
            )
        if not 1 <= self.min_inject <= self.max_inject or self.fetch < 1:
            raise ConfigError(
                f"a profile needs fetch >= 1 and 1 <= min_inject <= max_inject "
                f"(got fetch {self.fetch}, {self.min_inject}-{self.max_inject})"
            )


PROFILES: dict[str, ProfileSettings] = {
    "lean": ProfileSettings(
        fetch=10, steps=(), max_rewrites=0, relative_trust=0.6, absolute_trust=0.35,
        min_inject=3, max_inject=5, trust="strict", kb_factor=0.5, escalate_to="deep",
    ),
    "balanced": ProfileSettings(
        fetch=30, steps=("context", "expand"), max_rewrites=1, relative_trust=0.4,
        absolute_trust=0.2, min_inject=6, max_inject=10, trust="standard", kb_factor=1.0,
        escalate_to="deep",
    ),
    "deep": ProfileSettings(
        fetch=60, steps=REWRITE_STEPS, max_rewrites=99, relative_trust=0.2,
        absolute_trust=0.1, min_inject=8, max_inject=DEFAULT_MAX_INJECT, trust="permissive",
        kb_factor=1.5, rerank=True, explain=True, takes_max_inject=True,
    ),
}  # fmt: skip
"""Every profile a retrieval can apply, by name (`auto` chooses among them per query): the
built-in ones and those registered (the settings' `retrieval_profiles`)."""

BUILTIN_PROFILES: Mapping[str, ProfileSettings] = MappingProxyType(dict(PROFILES))
"""`lean`, `balanced` and `deep`: the profiles `auto` chooses among (`retrieval_auto` may put
a registered one in the place of each)."""


def register_profile(name: str, settings: ProfileSettings) -> None:
    """Add (or replace) a retrieval profile: `retrieve(..., profile=name)` then applies it.

    `collective.config` registers each profile a configuration declares.

    Raises:
        ConfigError: `name` is `auto` (the chooser's name), blank, or a built-in profile's.
    """
    if not name.strip() or name == "auto" or name in BUILTIN_PROFILES:
        raise ConfigError(
            f"a retrieval profile cannot be named {name!r} (blank, auto or built-in); give "
            "it a name of its own"
        )
    PROFILES[name] = settings


_TOP_UP_FLOOR = 0.05
_AGREEMENT_BONUS = 0.1
_STEP_WEIGHT = {
    "original": 1.0,
    "context": 0.95,
    "keywords": 1.0,
    "expand": 0.9,
    "relax": 0.6,
    "feedback": 0.7,
    "llm": 0.9,
}

FILLER = frozenset(
    """best better good use used using uses need needs want wants make makes made get gets
    thing things way ways recommend recommended tell know like kind kinds type types really
    much many also one ones please help go going something anything someone would could
    should might may must able actually just well lot lots bit quite pretty sure""".split()
)

SYNONYMS_ENV = environment.SYNONYMS_ENV


def synonyms(path: str | None = None) -> dict[str, tuple[str, ...]]:
    """Word -> its synonyms, from the file `path` (the `synonyms` setting) or the packaged file.

    `path` None reads `$COLLECTIVE_SYNONYMS`; "" is the packaged file.

    The file has one group of words a line (`#` starts a comment); each word of a group maps
    to the others.

    Raises:
        ConfigError: The file cannot be read.
    """
    return _load_synonyms(environment.synonyms_file() if path is None else path)


@functools.cache
def _load_synonyms(path: str) -> dict[str, tuple[str, ...]]:
    source = Path(path) if path else resources.files("collective") / "data/synonyms.txt"
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read synonyms from {source}: {exc}; fix the path or unset the setting "
            f"synonyms ({SYNONYMS_ENV})"
        ) from exc
    table: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        words = line.split("#", 1)[0].lower().split()
        for word in words:
            table[word] = tuple(w for w in words if w != word)
    return table


_COMPARISON = re.compile(
    r"\b(vs\.?|versus|compare[ds]?|comparison|difference|differences|between|better|worse|"
    r"instead|alternative|or)\b",
    re.IGNORECASE,
)
_REASONING = re.compile(r"\b(why|how|explain|trade-?offs?|pros|cons|when)\b", re.IGNORECASE)
_ANAPHORA = re.compile(r"\b(it|its|that|this|those|these|they|them|the same|one)\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass
class RetrievalResult:
    """What one retrieval did and what it injects."""

    requested: str
    """The profile asked for (may be `auto`)."""
    applied: str
    """The profile that ran (a `PROFILES` name: `lean`, `balanced`, `deep`, or one registered)."""
    reason: str
    """Why `applied` ran."""
    candidates: int
    """Distinct chunks seen across all queries."""
    injected: list[Chunk]
    """The chunks to put in the prompt, best first, scores fused 0..1."""
    rewrites: list[str] = field(default_factory=list)
    """Rewritten queries issued (their count is the rewrite attempts)."""
    diagnostics: list[str] = field(default_factory=list)
    latency_ms: float = 0.0
    sides: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per injected chunk id: its lexical and dense rank and score (None: not found that way)."""
    dense: dict[str, Any] = field(default_factory=dict)
    """What the dense side did: `used`, `hits`, `note`, and the fusion."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the docs/design.md `retrieval` object plus detail."""
        return {
            "requested": self.requested,
            "applied": self.applied,
            "reason": self.reason,
            "candidates": self.candidates,
            "injected": [c.id for c in self.injected],
            "rewrites": list(self.rewrites),
            "rewrite_attempts": len(self.rewrites),
            "diagnostics": list(self.diagnostics),
            "latency_ms": round(self.latency_ms, 3),
            "dense": dict(self.dense),
            "chunks": [
                {
                    "id": c.id,
                    "source": c.source,
                    "heading": c.heading,
                    "tags": list(c.tags),
                    "score": round(c.score, 4),
                    **self.sides.get(c.id, {}),
                }
                for c in self.injected
            ],
        }


def kb_allocation_factor(applied_profile: str) -> float:
    """How the applied profile scales a node's KB-chunk allocation (within the node's budget).

    Returns:
        The profile's `kb_factor`: 0.5 for lean, 1.0 for balanced, 1.5 for deep.

    Raises:
        ConfigError: For `auto` (resolve it first) or an unknown profile.
    """
    if applied_profile not in PROFILES:
        raise ConfigError(
            f"no KB allocation for profile {applied_profile!r}; use {', '.join(PROFILES)} "
            "(resolve auto with retrieve() first)"
        )
    return PROFILES[applied_profile].kb_factor


def _keywords(query: str) -> list[str]:
    return [t for t in query_terms(query) if t not in FILLER]


def _is_follow_up(query: str, context: str) -> bool:
    return bool(context.strip()) and bool(_ANAPHORA.search(query)) and len(_keywords(query)) <= 4


def choose_profile(
    query: str, context: str = "", *, max_latency_ms: float | None = None
) -> tuple[AppliedProfile, str]:
    """The profile `auto` applies to `query`, and why.

    Args:
        query: The question.
        context: The caller's context (e.g. the conversation so far).
        max_latency_ms: A latency bound; tight bounds rule out the costlier profiles.

    Returns:
        `(profile, reason)`.
    """
    words = _keywords(query)
    comparison = bool(_COMPARISON.search(query))
    reasoning = bool(_REASONING.search(query))
    parts = query.count("?") + len(re.findall(r"\b(and|also|plus)\b", query, re.IGNORECASE))
    follow_up = _is_follow_up(query, context)
    signals = []
    if comparison:
        signals.append("comparison")
    if reasoning:
        signals.append("why/how reasoning")
    if parts >= 2:
        signals.append("multi-part")
    if follow_up:
        signals.append("follow-up that relies on the context")
    described = f"{len(words)} content words" + (f", {', '.join(signals)}" if signals else "")

    # Wording alone sends only a follow-up to deep: a long, comparing or many-part question
    # starts at balanced, and `retrieve` escalates it when the fast rankings disagree.
    profile: AppliedProfile
    if follow_up:
        profile = "deep"
    elif len(words) <= 3 and not signals:
        profile = "lean"
    else:
        profile = "balanced"
    reason = f"{profile}: {described}"
    if max_latency_ms is not None:
        cap: AppliedProfile | None = None
        if max_latency_ms < 5 and profile != "lean":
            cap = "lean"
        elif max_latency_ms < 20 and profile == "deep":
            cap = "balanced"
        if cap is not None:
            reason = f"{cap}: {described} suggests {profile}, but max_latency_ms={max_latency_ms:g}"
            profile = cap
    return profile, reason


def backend_rewriter(
    backend: Backend,
    loop: asyncio.AbstractEventLoop | None = None,
    *,
    max_tokens: int = 96,
    timeout: float = 60.0,
) -> Rewriter:
    """An LLM rewriter for deep that asks `backend` for up to three search queries.

    The returned callable is synchronous (retrieval is). Given the event loop that owns the
    backend, call it from a worker thread (`asyncio.to_thread(retrieve, ...)`): each request is
    scheduled on that loop. Without a loop it runs the request on a loop of its own.
    """

    def rewrite(query: str, context: str) -> list[str]:
        prompt = (
            "Rewrite the question into up to three short keyword search queries for a "
            "knowledge base, one per line, nothing else.\n"
            + (f"Context: {context[:500]}\n" if context else "")
            + f"Question: {query}"
        )
        request = backend.chat(
            [{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0.0
        )
        if loop is not None:
            text = asyncio.run_coroutine_threadsafe(request, loop).result(timeout).text
        else:
            with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
                text = pool.submit(asyncio.run, request).result(timeout).text
        lines = [re.sub(r"^[\s\-*\d.)]+", "", line).strip() for line in text.splitlines()]
        return [line for line in lines if line][:3]

    return rewrite


DENSE_WEIGHT = 0.6
"""Share of the dense side in a hybrid score (the lexical score has the rest)."""
_FUSION = "convex"
"""`convex` (weighted sum of calibrated scores) or `rrf` (reciprocal rank fusion, k=60)."""
_RRF_K = 60
_COSINE_FLOOR, _COSINE_CEIL = 0.15, 0.75
"""Cosines at or below the floor count as unrelated (0), at or above the ceiling as a match (1)."""
DENSE_MIN = 0.3
"""A dense hit below this cosine is no candidate (unrelated text reaches 0.25 with MiniLM)."""


_DENSE_AHEAD = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="dense")


def _calibrate(cosine: float) -> float:
    return min(1.0, max(0.0, (cosine - _COSINE_FLOOR) / (_COSINE_CEIL - _COSINE_FLOOR)))


def _hybrid(
    store: KnowledgeStore, query: str, lexical: list[Chunk], fetch: int
) -> tuple[list[Chunk], dict[str, dict[str, Any]], dict[str, Any]]:
    """Fuse the lexical ranking with a dense search: (ranking, sides per chunk, dense summary)."""
    lex_rank = {c.id: i for i, c in enumerate(lexical)}
    lex_score = {c.id: c.score for c in lexical}
    if not isinstance(store, DenseStore):
        note = "dense: this store has no separate dense search; its own ranking is used"
        return lexical, {}, {"used": False, "note": note}
    found = store.dense_search(query, fetch, also=list(lex_rank))
    found.hits = [c for c in found.hits if c.score >= DENSE_MIN]
    summary: dict[str, Any] = {"used": bool(found.hits), "hits": len(found.hits)}
    if found.note:
        summary["note"] = found.note
    if not found.hits:
        summary.setdefault("note", f"dense: no chunk reached cosine {DENSE_MIN}")
        return lexical, {}, summary
    summary["fusion"] = _FUSION
    dense_rank = {c.id: i for i, c in enumerate(found.hits)}
    summary["agreement"] = _agreement(lexical, found.hits, lex_rank, dense_rank)
    pool = {c.id: c for c in found.hits} | {c.id: c for c in lexical}
    fused, sides = [], {}
    for cid, chunk in pool.items():
        cosine = found.similarity.get(cid, 0.0)
        if _FUSION == "rrf":
            score = sum(1.0 / (_RRF_K + 1 + r[cid]) for r in (lex_rank, dense_rank) if cid in r)
            score *= (_RRF_K + 1) / 2
        else:
            score = DENSE_WEIGHT * _calibrate(cosine) + (1 - DENSE_WEIGHT) * lex_score.get(cid, 0.0)
        fused.append(chunk.with_score(round(score, 6)))
        sides[cid] = {
            "lexical_rank": lex_rank[cid] + 1 if cid in lex_rank else None,
            "lexical_score": round(lex_score[cid], 4) if cid in lex_score else None,
            "dense_rank": dense_rank[cid] + 1 if cid in dense_rank else None,
            "dense_score": round(cosine, 4) if cid in found.similarity else None,
        }
    return rank_chunks(fused), sides, summary


AGREE_WITHIN = 3
"""The two rankings agree when each one's first chunk is among the other's first three."""
CONFIDENT_LEXICAL = 0.5
"""A lexical first chunk scoring below this (about half the query's weighted words) is weak..."""
CONFIDENT_DENSE = 0.5
"""... and so is a dense first chunk under this cosine; both weak: `auto` escalates too."""


def _agreement(
    lexical: list[Chunk], dense: list[Chunk], lex_rank: dict[str, int], dense_rank: dict[str, int]
) -> dict[str, Any]:
    """How the lexical and the dense ranking agree at the top, and how confident each top is."""
    summary: dict[str, Any] = {"dense_top": dense[0].id, "dense_cosine": round(dense[0].score, 4)}
    if lexical:
        summary |= {
            "lexical_top": lexical[0].id,
            "lexical_score": round(lexical[0].score, 4),
            "lexical_top_dense_rank": dense_rank[lexical[0].id] + 1
            if lexical[0].id in dense_rank
            else None,
            "dense_top_lexical_rank": lex_rank[dense[0].id] + 1
            if dense[0].id in lex_rank
            else None,
        }
    return summary


def disagreement(agreement: Mapping[str, Any] | None, lexical_top: float) -> str:
    """Why `auto` should spend more on this query ("" when the fast rankings agree).

    Args:
        agreement: The dense side's `agreement` summary (None: no dense ranking).
        lexical_top: The best lexical score (when there is no dense ranking).
    """
    if agreement is None:
        if lexical_top < CONFIDENT_LEXICAL:
            return f"no dense ranking and the best lexical score is only {lexical_top:.2f}"
        return ""
    if "lexical_top" not in agreement:
        return "no lexical match; only the dense ranking found chunks"
    lex_in_dense = agreement["lexical_top_dense_rank"]
    dense_in_lex = agreement["dense_top_lexical_rank"]
    agree = agreement["lexical_top"] == agreement["dense_top"] or (
        lex_in_dense is not None
        and lex_in_dense <= AGREE_WITHIN
        and dense_in_lex is not None
        and dense_in_lex <= AGREE_WITHIN
    )
    lexical, cosine = agreement["lexical_score"], agreement["dense_cosine"]
    where = (
        f"lexical's first is dense's #{lex_in_dense or '-'}, dense's first is lexical's "
        f"#{dense_in_lex or '-'}"
    )
    if not agree:
        return f"lexical and dense rankings disagree ({where})"
    if lexical < CONFIDENT_LEXICAL and cosine < CONFIDENT_DENSE:
        return (
            f"both rankings are unsure (best lexical score {lexical:.2f}, best cosine {cosine:.2f})"
        )
    return ""


class _Fusion:
    """Collects each query's hits and fuses them into one ranking."""

    def __init__(self) -> None:
        self.best: dict[str, float] = {}
        self.chunks: dict[str, Chunk] = {}
        self.found: Counter[str] = Counter()
        self.lists = 0

    def add(self, hits: list[Chunk], weight: float) -> int:
        self.lists += 1
        new = 0
        for chunk in hits:
            if chunk.id not in self.chunks:
                new += 1
                self.chunks[chunk.id] = chunk
            self.found[chunk.id] += 1
            self.best[chunk.id] = max(self.best.get(chunk.id, 0.0), weight * chunk.score)
        return new

    def ranked(self) -> list[Chunk]:
        fused = []
        for cid, chunk in self.chunks.items():
            bonus = 0.0
            if self.lists > 1:
                bonus = _AGREEMENT_BONUS * (self.found[cid] - 1) / (self.lists - 1)
            fused.append(chunk.with_score(round(self.best[cid] + bonus, 6)))
        return rank_chunks(fused)


def _feedback_terms(
    top: list[Chunk], pool: list[Chunk], exclude: set[str], n: int = 5
) -> list[str]:
    """Words frequent in the best chunks but rare in the candidate pool (pseudo-relevance)."""

    def words(chunk: Chunk) -> set[str]:
        # A chunk as `kb add` makes it; a huge one in an old KB is read no further.
        text = f"{chunk.heading} {chunk.text[:MAX_CHUNK_CHARS]}".lower()
        return {w for w in _WORD.findall(text) if w not in STOPWORDS and len(w) > 2}

    pool_df: Counter[str] = Counter()
    for chunk in pool:
        pool_df.update(words(chunk))
    top_tf: Counter[str] = Counter()
    for chunk in top:
        top_tf.update(words(chunk))
    size = max(len(pool), 1)
    weights = {
        w: tf * math.log(1 + size / pool_df[w])
        for w, tf in top_tf.items()
        if w not in exclude and w not in FILLER and not w.isdigit()
    }
    return [w for w, _ in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def retrieve(
    store: KnowledgeStore,
    query: str,
    profile: str = "auto",
    *,
    max_inject: int | None = None,
    max_latency_ms: float | None = None,
    context: str = "",
    rewriter: Rewriter | None = None,
    reranker: Reranker | None = None,
    rerank: str | None = None,
    synonyms_file: str | None = None,
    auto: Mapping[AppliedProfile, str] | None = None,
) -> RetrievalResult:
    """Retrieve chunks for `query` under a retrieval profile.

    Args:
        store: Any knowledge store.
        query: The question.
        profile: A `PROFILES` name (`lean`, `balanced`, `deep`, or one registered) or `auto`
            (see the module docstring).
        max_inject: Cap on injected chunks, for any profile.
        max_latency_ms: Stop issuing rewrites once this much time has passed.
        context: The caller's context (conversation summary); used by `auto` and for
            follow-up questions.
        rewriter: An extra (e.g. LLM) rewriter; only a profile with the `llm` step (deep)
            calls it.
        reranker: What reorders the best candidates of a profile that reranks (deep);
            default: the one `rerank` names.
        rerank: The `rerank` setting (`engine`, `embedded`, `none`); None: the environment's
            (`collective.kb.rerank.configured_reranker`).
        synonyms_file: The `synonyms` setting (a file; "": the packaged one); None: the
            environment's.
        auto: The `retrieval_auto` setting: the profile `auto` applies in place of each of
            its choices (`{"deep": "thorough"}`).

    Returns:
        The result, with the applied profile, the reason, and the diagnostics.

    Raises:
        ConfigError: Unknown profile, or a non-positive `max_inject`.
    """
    for name in [profile, *(auto or {}).values()]:
        if name != "auto" and name not in PROFILES:
            raise ConfigError(
                f"unknown retrieval profile {name!r}; use {', '.join(PROFILES)} or auto"
            )
    if max_inject is not None and max_inject < 1:
        raise ConfigError(f"max_inject must be at least 1 (got {max_inject})")
    if reranker is None:
        from collective.kb.rerank import lazy_reranker

        reranker = lazy_reranker(rerank)
    table = synonyms(synonyms_file)
    with retrieval_span(profile, query_chars=len(query)) as span:
        result = _retrieve(
            store, query, profile, max_inject, max_latency_ms, context, rewriter, reranker,
            table, {str(tier): name for tier, name in (auto or {}).items()},
        )  # fmt: skip
        for position, rewritten in enumerate(result.rewrites, 1):
            span.add_event("retrieval.rewrite", {"attempt": position, "query": rewritten})
        record_retrieval(span, result.to_dict())
    return result


NAMED_BOOST = 0.1
"""What a candidate of a document the query names scores more (the scale of the agreement
bonus: a strong hint, not a verdict; chosen, not tuned)."""


@dataclass(frozen=True)
class _Named:
    """The documents a query names, and the query in the KB's own words."""

    vocabulary: Vocabulary
    keys: frozenset[str]
    titled: str
    """The query with each name that is not its document's title replaced by the title."""
    said: str
    """How the names read, for the diagnostics ("Teflon: PTFE")."""


def _named(store: KnowledgeStore, query: str) -> _Named | None:
    """What the store's vocabulary says the query names (None: a store without one, or none)."""
    if not isinstance(store, VocabularySource):
        return None
    vocabulary = store.vocabulary()
    named = vocabulary.named_in(query)
    if not named:
        return None
    titled, said, last = [], [], 0
    for n in sorted(named, key=lambda n: n.start):
        if n.start < last:  # a shared name two documents answer to: one replacement
            continue
        end = n.start + len(n.written)
        titled += [query[last : n.start], n.thing.title]
        said.append(
            n.thing.title if n.written == n.thing.title else f"{n.written}: {n.thing.title}"
        )
        last = end
    titled.append(query[last:])
    return _Named(
        vocabulary, frozenset(n.thing.key for n in named), "".join(titled), "; ".join(said)
    )


def _boost_named(ranked: list[Chunk], named: _Named | None) -> list[Chunk]:
    """`ranked` with the chunks of the documents the query names `NAMED_BOOST` higher."""
    if named is None:
        return ranked
    boosted = []
    for chunk in ranked:
        thing = named.vocabulary.thing_of(chunk.id)
        if thing is not None and thing.key in named.keys:
            chunk = chunk.with_score(round(chunk.score + NAMED_BOOST, 6))
        boosted.append(chunk)
    return rank_chunks(boosted)


def _rewrites(
    step: str,
    query: str,
    keywords: list[str],
    context: str,
    settings: ProfileSettings,
    fusion: _Fusion,
    rewriter: Rewriter | None,
    diagnostics: list[str],
    table: Mapping[str, tuple[str, ...]],
) -> list[str]:
    """The queries one rewrite step adds (new, non-blank, not the query itself)."""
    queries: list[str] = []
    if step == "context":
        extra = [w for w in _keywords(context) if w not in keywords][:6]
        queries = [" ".join(keywords + extra)] if extra else []
    elif step == "keywords":
        queries = [" ".join(keywords)]
    elif step == "expand":
        expanded = [s for w in keywords for s in table.get(w, ()) if s not in keywords]
        queries = [" ".join(keywords + list(dict.fromkeys(expanded)))] if expanded else []
        if not queries and "keywords" not in settings.steps:
            # Without synonyms, a profile with no keywords step of its own searches those.
            queries = [" ".join(keywords)]
    elif step == "relax":
        queries = [f"{a} {b}" for a, b in zip(keywords, keywords[1:], strict=False)]
        if len(keywords) <= 2:
            queries = []
    elif step == "feedback":
        ranked = fusion.ranked()
        extra = _feedback_terms(ranked[:3], ranked, set(keywords))
        queries = [" ".join(keywords + extra)] if extra else []
    elif step == "llm" and rewriter is not None:
        try:
            queries = [q for q in rewriter(query, context) if q.strip()][:3]
        except Exception as exc:  # noqa: BLE001 - a rewriter failure must not fail retrieval
            diagnostics.append(f"LLM rewriter failed ({type(exc).__name__}: {exc}); skipped")
    # A rewrite with the query's own words would only repeat the same search.
    same = set(query_terms(query))
    return [q for q in dict.fromkeys(queries) if q.strip() and set(query_terms(q)) != same]


def _applied_profile(
    profile: str, query: str, context: str, max_latency_ms: float | None
) -> tuple[str, str]:
    """The profile a retrieval applies, and why (`auto` chooses per query)."""
    if profile == "auto":
        return choose_profile(query, context, max_latency_ms=max_latency_ms)
    return profile, f"{profile}: requested explicitly"


def _inject_range(settings: ProfileSettings, max_inject: int | None) -> tuple[int, int]:
    """The fewest and most chunks to inject (`max_inject` caps the profile, or sets it)."""
    upper = settings.max_inject if max_inject is None else min(settings.max_inject, max_inject)
    if settings.takes_max_inject and max_inject is not None:
        upper = max_inject
    return min(settings.min_inject, upper), upper


def _rewrite_steps(
    settings: ProfileSettings, query: str, context: str, rewriter: bool
) -> list[str]:
    """The rewrite steps a profile tries, in order, up to its `max_rewrites`."""
    follow_up = _is_follow_up(query, context)
    steps = [
        s for s in settings.steps if (s != "context" or follow_up) and (s != "llm" or rewriter)
    ]
    return steps[: settings.max_rewrites]


def _hybrid_note(
    injected: list[Chunk], sides: Mapping[str, Any], dense: Mapping[str, Any], lexical: int
) -> str:
    """How the injected chunks were found: both ways, dense only, lexical only."""
    both = sum(
        1 for c in injected if None not in (sides[c.id]["lexical_rank"], sides[c.id]["dense_rank"])
    )
    lexical_only = sum(1 for c in injected if sides[c.id]["dense_rank"] is None)
    return (
        f"hybrid ({dense['fusion']}): {dense['hits']} dense + {lexical} lexical "
        f"candidates; injected {both} found both ways, "
        f"{len(injected) - both - lexical_only} dense only, {lexical_only} lexical only"
    )


def _unique_text(ranked: list[Chunk], explain: bool, diagnostics: list[str]) -> list[Chunk]:
    """One copy of identical text (the same passage ingested from two files), best first."""
    seen_text: set[str] = set()
    unique: list[Chunk] = []
    for chunk in ranked:
        text = chunk.text
        # Whitespace-normalised for chunks as `kb add` makes them; a huge one of an old KB is
        # compared as it is (splitting 20 MB into words took 300 MB).
        key = " ".join(text.split()).lower() if len(text) <= 2 * MAX_CHUNK_CHARS else text
        if key in seen_text:
            if explain:
                diagnostics.append(f"dropped {chunk.id}: duplicate text")
            continue
        seen_text.add(key)
        unique.append(chunk)
    return unique


RERANK_K = 30
"""Deep's best candidates the reranker scores: 30 (not the injected 16) so that it can lift a
relevant chunk the fused ranking put lower (the fused top 30 holds one for 0.88 of the tune
split's hard queries, the top 10 for 0.82)."""
RERANK_CONFIDENT_K = DEFAULT_MAX_INJECT
"""... and only as many as deep injects when the embedder is confident: the fused first chunk's
cosine is at least `CONFIDENT_DENSE` (on the report, held-out and colloquial sets auto's
hit@5 and MRR stayed or rose, with 5-12% fewer passages scored; bench/README.md)."""
RERANK_FUSED = 6.0
"""Weight of a candidate's fused score (0..1) against its standardised reranker score in the new
order: a fused lead of 1/6 is worth one standard deviation of the reranker's. Chosen on the tune
split (bench/README.md): 4-9 kept its easy queries at MRR 1.000 (the judge alone: 0.760, as it
calls several sections of the right material answers) with its hard ones at 0.695-0.697."""


def _rerank(
    query: str,
    unique: list[Chunk],
    reranker: Reranker,
    sides: dict[str, dict[str, Any]],
    diagnostics: list[str],
) -> list[Chunk]:
    """The best candidates reordered by the reranker, keeping their scores in order.

    `RERANK_K` of them, or `RERANK_CONFIDENT_K` when the embedder is confident. Each
    candidate's key is its standardised reranker score + `RERANK_FUSED` x its fused score;
    the reordered head takes the head's scores, best first, so scores still fall with rank and
    the trust pass sees the same values.
    """
    cosine = sides.get(unique[0].id, {}).get("dense_score") if unique else None
    confident = cosine is not None and cosine >= CONFIDENT_DENSE
    head = unique[: RERANK_CONFIDENT_K if confident else RERANK_K]
    if len(head) < 2:
        return unique
    try:
        raw = [float(x) for x in reranker(query, head)]
    except Exception as exc:  # noqa: BLE001 - a reranker failure must not fail retrieval
        diagnostics.append(f"reranker failed ({type(exc).__name__}: {exc}); fused order kept")
        return unique
    mean = sum(raw) / len(raw)
    spread = math.sqrt(sum((x - mean) ** 2 for x in raw) / len(raw)) or 1.0
    key = [(x - mean) / spread + RERANK_FUSED * c.score for x, c in zip(raw, head, strict=True)]
    order = sorted(range(len(head)), key=lambda i: (-key[i], i))
    for i, chunk in enumerate(head):
        sides.setdefault(chunk.id, {})["rerank_score"] = round(raw[i], 4)
    moved = sum(1 for pos, i in enumerate(order) if pos != i)
    why = f" (the embedder is confident: cosine {cosine:.2f})" if confident else ""
    diagnostics.append(
        f"reranked the best {len(head)}{why}: {moved} moved, first now {head[order[0]].id} "
        f"(was {head[0].id})"
    )
    return [head[i].with_score(head[pos].score) for pos, i in enumerate(order)] + unique[
        len(head) :
    ]


def _trust_pass(
    unique: list[Chunk],
    settings: ProfileSettings,
    lower: int,
    upper: int,
    diagnostics: list[str],
) -> list[Chunk]:
    """The chunks to inject: those the profile trusts, up to `upper`, topped up to `lower`."""
    top = unique[0].score if unique else 0.0
    threshold = max(settings.absolute_trust, settings.relative_trust * top)
    trusted = [c for c in unique if c.score >= threshold]
    injected = trusted[:upper]
    if len(injected) < lower:
        extra_chunks = [c for c in unique if c.score < threshold and c.score >= _TOP_UP_FLOOR]
        top_up = extra_chunks[: lower - len(injected)]
        if top_up:
            diagnostics.append(
                f"{settings.trust} trust pass kept {len(injected)} (< {lower}); topped up with "
                f"{len(top_up)} below {threshold:.2f}"
            )
        injected += top_up
    dropped = [c for c in unique if c not in injected]
    if settings.explain:
        for chunk in dropped[:10]:
            why = f"score {chunk.score:.2f} < {threshold:.2f}"
            if chunk.score >= threshold:
                why = f"over max inject {upper}"
            diagnostics.append(f"dropped {chunk.id}: {why}")
        if len(dropped) > 10:
            diagnostics.append(f"... and {len(dropped) - 10} more dropped")
    diagnostics.append(
        f"{settings.trust} trust pass (score >= {threshold:.2f}): {len(trusted)} of "
        f"{len(unique)} candidates passed, {len(injected)} injected (range {lower}-{upper})"
    )
    return injected


def _rewrite_chain(
    store: KnowledgeStore,
    query: str,
    context: str,
    settings: ProfileSettings,
    rewriter: Rewriter | None,
    fusion: _Fusion,
    diagnostics: list[str],
    start: float,
    max_latency_ms: float | None,
    table: Mapping[str, tuple[str, ...]],
) -> list[str]:
    """The profile's rewrites, each searched and fused in turn, until the latency bound.

    Returns the rewritten queries searched; what each found goes to `fusion` and `diagnostics`.
    """
    keywords = _keywords(query)
    rewrites: list[str] = []
    for step in _rewrite_steps(settings, query, context, rewriter is not None):
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        if max_latency_ms is not None and elapsed_ms >= max_latency_ms:
            diagnostics.append(
                f"rewrite chain stopped before {step!r}: {elapsed_ms:.1f} ms >= "
                f"max_latency_ms {max_latency_ms:g}"
            )
            break
        queries = _rewrites(
            step, query, keywords, context, settings, fusion, rewriter, diagnostics, table
        )
        if not queries:
            if settings.explain:
                diagnostics.append(f"rewrite {step!r}: nothing to add")
            continue
        for rewritten in queries:
            found = store.search(rewritten, settings.fetch)
            new = fusion.add(found, _STEP_WEIGHT[step])
            rewrites.append(rewritten)
            diagnostics.append(f"rewrite {step!r} {rewritten!r}: {len(found)} hits, {new} new")
    return rewrites


def _retrieve(
    store: KnowledgeStore,
    query: str,
    profile: str,
    max_inject: int | None,
    max_latency_ms: float | None,
    context: str,
    rewriter: Rewriter | None,
    reranker: Reranker | None,
    table: Mapping[str, tuple[str, ...]],
    auto: Mapping[str, str],
) -> RetrievalResult:
    """Run the requested profile; `auto` may escalate.

    `auto` runs the profile the query's wording suggests, and escalates when the fast rankings
    disagree (`disagreement`); any other profile runs as asked. `auto` maps each of its
    choices through `auto` (the `retrieval_auto` setting).
    """
    start = time.perf_counter()
    applied, reason = _applied_profile(profile, query, context, max_latency_ms)
    if profile == "auto" and auto.get(applied, applied) != applied:
        reason = f"{auto[applied]} in place of {reason}"
        applied = auto[applied]
    args = (store, query, max_inject, max_latency_ms, context, rewriter, reranker, table, start)
    result = _run(applied, reason, *args)
    result.requested = profile
    target = PROFILES[applied].escalate_to
    target = auto.get(target, target) if target is not None else None
    if profile != "auto" or target is None or target == applied:
        return result
    lexical_top = max((c.score for c in result.injected), default=0.0)
    why = disagreement(result.dense.get("agreement"), lexical_top)
    if not why:
        return result
    if max_latency_ms is not None and max_latency_ms < 20:
        result.reason += f"; {why}, but max_latency_ms={max_latency_ms:g} keeps it"
        return result
    escalated = _run(target, f"{target}: {why} (escalated from {applied})", *args)
    escalated.requested = profile
    return escalated


def _run(
    applied: str,
    reason: str,
    store: KnowledgeStore,
    query: str,
    max_inject: int | None,
    max_latency_ms: float | None,
    context: str,
    rewriter: Rewriter | None,
    reranker: Reranker | None,
    table: Mapping[str, tuple[str, ...]],
    start: float,
) -> RetrievalResult:
    """One profile's retrieval: search, rewrite, fuse, rerank if it does, trust pass."""
    lower, upper = _inject_range(settings := PROFILES[applied], max_inject)
    diagnostics: list[str] = []
    fusion = _Fusion()

    def elapsed_ms() -> float:
        return (time.perf_counter() - start) * 1000.0

    dense_query = query
    if _is_follow_up(query, context):
        dense_query = f"{query} ({' '.join(_keywords(context)[:8])})"
    # The query's embedding (the costly part of the dense side) is computed on another thread
    # while the lexical searches run: SQLite and BLAS release the GIL, so two cores share it.
    early = None
    if isinstance(store, DenseStore):
        early = _DENSE_AHEAD.submit(store.dense_search, dense_query, 1)
    hits = store.search(query, settings.fetch)
    fusion.add(hits, _STEP_WEIGHT["original"])
    if settings.steps:
        diagnostics.append(f"original query: {len(hits)} hits")
    named = _named(store, query)
    if named is not None:
        note = f"names: {named.said}"
        if named.titled != query:
            titled = store.search(named.titled, settings.fetch)
            new = fusion.add(titled, _STEP_WEIGHT["original"])
            note += f"; searched as {named.titled!r}: {len(titled)} hits, {new} new"
        diagnostics.append(note)

    if rewriter is not None and "llm" not in settings.steps:
        diagnostics.append(f"LLM rewriter not used: {applied} has no llm step (only deep calls it)")
    rewrites = _rewrite_chain(
        store, query, context, settings, rewriter, fusion, diagnostics, start, max_latency_ms, table
    )

    if early is not None:
        early.result()  # its errors (another model's KB) are this call's
    ranked, sides, dense = _hybrid(store, dense_query, fusion.ranked(), settings.fetch)
    ranked = _boost_named(ranked, named)
    unique = _unique_text(ranked, settings.explain, diagnostics)
    if settings.rerank and reranker is not None:
        unique = _rerank(query, unique, reranker, sides, diagnostics)
    injected = _trust_pass(unique, settings, lower, upper, diagnostics)
    if dense.get("used"):
        diagnostics.append(_hybrid_note(injected, sides, dense, len(fusion.chunks)))
    if dense.get("note"):
        diagnostics.append(dense["note"])
    if not unique:
        diagnostics.append("no chunk matched the query's content words")
    expanded = getattr(store, "has_expansions", None)
    if callable(expanded) and not expanded():
        diagnostics.append(
            "expansions: none in this KB (chunks are found by their own words only); "
            "`collective kb reindex --expansions` adds them"
        )
    return RetrievalResult(
        sides={c.id: sides[c.id] for c in injected if c.id in sides},
        dense=dense,
        requested=applied,
        applied=applied,
        reason=reason,
        candidates=len(unique),
        injected=injected,
        rewrites=rewrites,
        diagnostics=diagnostics,
        latency_ms=elapsed_ms(),
    )
