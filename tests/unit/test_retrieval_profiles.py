"""Retrieval profiles over the real demo KB: they differ visibly, are deterministic and bounded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from collective.errors import ConfigError
from collective.kb.demo import open_default_store
from collective.kb.retrieval import (
    PROFILES,
    ProfileSettings,
    choose_profile,
    kb_allocation_factor,
    retrieve,
)
from collective.kb.sqlite_store import SqliteKnowledgeStore
from collective.kb.store import Chunk, DenseResult

QUERY = "Which filament should I use for a part that sits in a hot car, and why?"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> SqliteKnowledgeStore:
    return open_default_store(tmp_path_factory.mktemp("kb") / "demo.sqlite")


def test_profiles_visibly_differ(store: SqliteKnowledgeStore) -> None:
    lean = retrieve(store, QUERY, "lean")
    balanced = retrieve(store, QUERY, "balanced")
    deep = retrieve(store, QUERY, "deep")
    assert (len(lean.rewrites), len(balanced.rewrites)) == (0, 1)
    assert len(deep.rewrites) >= 3
    assert lean.candidates < balanced.candidates <= deep.candidates
    assert 3 <= len(lean.injected) <= 5
    assert 6 <= len(balanced.injected) <= 10
    assert 8 <= len(deep.injected) <= PROFILES["deep"].max_inject
    assert len(lean.injected) < len(balanced.injected) < len(deep.injected)
    # The hot-car chunk is found by every profile and ranked first.
    for result in (lean, balanced, deep):
        assert result.injected[0].heading == "Choosing a material > Parts in a hot car"
        scores = [c.score for c in result.injected]
        assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    assert any(d.startswith("dropped ") for d in deep.diagnostics)
    assert any("permissive trust pass" in d for d in deep.diagnostics)
    assert any("strict trust pass" in d for d in lean.diagnostics)


@pytest.mark.parametrize("profile", ["lean", "balanced", "deep", "auto"])
def test_same_query_and_profile_give_the_same_result(
    store: SqliteKnowledgeStore, profile: str
) -> None:
    a = retrieve(store, QUERY, profile).to_dict()
    b = retrieve(store, QUERY, profile).to_dict()
    a.pop("latency_ms"), b.pop("latency_ms")
    assert a == b


def test_to_dict_has_the_contract_keys(store: SqliteKnowledgeStore) -> None:
    result = retrieve(store, "PETG drying", "balanced")
    data = result.to_dict()
    assert {"requested", "applied", "reason", "candidates", "injected"} <= data.keys()
    assert data["injected"] == [c.id for c in result.injected]
    assert data["rewrite_attempts"] == len(data["rewrites"]) == 0  # keywords = the query: skipped
    assert data["requested"] == data["applied"] == "balanced"
    assert "requested explicitly" in data["reason"]


def test_auto_infers_the_profile_and_says_why() -> None:
    assert choose_profile("PETG drying")[0] == "lean"
    profile, reason = choose_profile("What temperature does PETG print at on a glass bed?")
    assert profile == "balanced" and "content words" in reason
    profile, reason = choose_profile(
        "Why is ASA better than PETG for outdoor parts, and how should I print it?"
    )
    # wording alone does not buy the reranker: deep only if the fast rankings then disagree
    assert profile == "balanced" and "comparison" in reason and "why/how" in reason
    # A follow-up leans on the caller's context.
    assert choose_profile("Is it stronger?")[0] == "lean"
    profile, reason = choose_profile("Is it stronger?", context="We compared PETG and PLA.")
    assert profile == "deep" and "follow-up" in reason
    # Tight latency bounds rule out costly profiles, and the reason says so.
    profile, reason = choose_profile(
        "Is it stronger?", context="We compared PETG and PLA.", max_latency_ms=10
    )
    assert profile == "balanced" and "max_latency_ms=10" in reason
    assert choose_profile("Why is ASA better than PETG outdoors?", max_latency_ms=1)[0] == "lean"


def test_auto_result_reports_requested_and_applied(store: SqliteKnowledgeStore) -> None:
    result = retrieve(store, "TPU print speed", "auto")
    assert (result.requested, result.applied) == ("auto", "lean")
    assert result.reason.startswith("lean:")


def test_follow_up_uses_context_keywords(store: SqliteKnowledgeStore) -> None:
    result = retrieve(store, "How long should I dry it?", "balanced", context="nylon gears")
    assert result.rewrites and "nylon" in result.rewrites[0]
    assert any("nylon" in c.text.lower() for c in result.injected[:3])


def test_max_inject_bounds_every_profile(store: SqliteKnowledgeStore) -> None:
    for profile in ("lean", "balanced", "deep"):
        assert len(retrieve(store, QUERY, profile, max_inject=2).injected) == 2
    assert len(retrieve(store, QUERY, "deep", max_inject=20).injected) > 16
    with pytest.raises(ConfigError):
        retrieve(store, QUERY, "deep", max_inject=0)


def test_max_latency_stops_the_rewrite_chain(store: SqliteKnowledgeStore) -> None:
    result = retrieve(store, QUERY, "deep", max_latency_ms=0)
    assert result.rewrites == []
    assert any("rewrite chain stopped" in d for d in result.diagnostics)
    assert result.injected  # the first pass still answers


def test_rewriter_hook_is_called_by_deep_only(store: SqliteKnowledgeStore) -> None:
    calls: list[tuple[str, str]] = []

    def rewriter(query: str, context: str) -> list[str]:
        calls.append((query, context))
        return ["glass transition heat deflection", ""]

    deep = retrieve(store, QUERY, "deep", rewriter=rewriter, context="summer")
    assert calls == [(QUERY, "summer")]
    assert deep.rewrites[-1] == "glass transition heat deflection"
    balanced = retrieve(store, QUERY, "balanced", rewriter=rewriter)
    assert len(calls) == 1
    assert any("only deep calls it" in d for d in balanced.diagnostics)


def test_failing_rewriter_is_diagnosed_not_fatal(store: SqliteKnowledgeStore) -> None:
    def broken(query: str, context: str) -> list[str]:
        raise TimeoutError("backend took too long")

    result = retrieve(store, QUERY, "deep", rewriter=broken)
    assert any("LLM rewriter failed (TimeoutError" in d for d in result.diagnostics)
    assert result.injected


def test_no_match_and_unknown_profile(store: SqliteKnowledgeStore) -> None:
    result = retrieve(store, "zzzz qqqq", "balanced")
    assert result.injected == [] and result.candidates == 0
    assert any("no chunk matched" in d for d in result.diagnostics)
    with pytest.raises(ConfigError, match="unknown retrieval profile"):
        retrieve(store, QUERY, "turbo")


def test_kb_allocation_factor() -> None:
    assert kb_allocation_factor("lean") < kb_allocation_factor("balanced") == 1.0
    assert kb_allocation_factor("deep") > 1.0
    with pytest.raises(ConfigError):
        kb_allocation_factor("auto")


def test_duplicate_text_from_two_files_is_injected_once(tmp_path: Path) -> None:
    text = "# Note\n\nPETG dries at sixty-five degrees for four hours.\n"
    for name in ("a.md", "b.md"):
        (tmp_path / name).write_text(text)
    kb = SqliteKnowledgeStore(tmp_path / "kb.sqlite")
    kb.add_paths([tmp_path])
    assert kb.count() == 2
    result = retrieve(kb, "PETG dries", "deep")
    assert len(result.injected) == 1
    assert any("duplicate text" in d for d in result.diagnostics)


def test_a_new_profile_is_one_declaration_and_reports_itself(
    store: SqliteKnowledgeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    wide = ProfileSettings(
        fetch=40, steps=("keywords", "relax"), max_rewrites=2, relative_trust=0.3,
        absolute_trust=0.15, min_inject=4, max_inject=12, trust="wide", kb_factor=1.25,
        rerank=True,
    )  # fmt: skip
    monkeypatch.setitem(PROFILES, "wide", wide)
    reranked: list[int] = []

    def reranker(query: str, chunks: object) -> list[float]:
        reranked.append(len(chunks))  # type: ignore[arg-type]
        return [0.0] * len(chunks)  # type: ignore[arg-type]

    result = retrieve(store, QUERY, "wide", reranker=reranker)
    data = result.to_dict()
    assert (data["requested"], data["applied"]) == ("wide", "wide")
    assert data["reason"] == "wide: requested explicitly"
    assert 1 <= len(result.rewrites) and reranked  # its own steps, and its rerank
    assert any(d.startswith("wide trust pass") for d in result.diagnostics)
    assert 4 <= len(result.injected) <= 12
    assert result.injected[0].heading == "Choosing a material > Parts in a hot car"
    assert kb_allocation_factor("wide") == 1.25
    with pytest.raises(ConfigError, match="unknown rewrite step"):
        ProfileSettings(
            fetch=5, steps=("psychic",), max_rewrites=1, relative_trust=0.3,
            absolute_trust=0.1, min_inject=1, max_inject=3, trust="x", kb_factor=1.0,
        )  # fmt: skip


class TwoRankings:
    """A store whose lexical and dense rankings are given (scores: lexical 0..1, cosines)."""

    def __init__(self, lexical: list[Chunk], dense: list[Chunk]) -> None:
        self.lexical, self.dense = lexical, dense

    def search(self, query: str, k: int) -> list[Chunk]:
        return self.lexical[:k]

    def get(self, chunk_id: str) -> Chunk | None:
        return next((c for c in self.lexical if c.id == chunk_id), None)

    def dense_search(self, query: str, k: int, also: Sequence[str] = ()) -> DenseResult:
        return DenseResult(hits=self.dense[:k], similarity={c.id: c.score for c in self.dense})


CHUNKS = [Chunk(f"mem_{i:016x}", f"passage number {i} about materials", "x.md") for i in range(8)]
HOT_CAR = "which plastic for a hot car dashboard"


def test_auto_escalates_when_lexical_and_dense_disagree_and_says_why() -> None:
    lexical = [c.with_score(0.9 - i / 20) for i, c in enumerate(CHUNKS)]
    dense = [c.with_score(0.8 - i / 20) for i, c in enumerate(reversed(CHUNKS))]
    reranked: list[str] = []

    def reranker(query: str, chunks: Sequence[Chunk]) -> list[float]:
        reranked.append(query)
        return [0.0] * len(chunks)

    result = retrieve(TwoRankings(lexical, dense), HOT_CAR, "auto", reranker=reranker)
    assert (result.requested, result.applied) == ("auto", "deep")
    assert "disagree" in result.reason and "escalated from balanced" in result.reason
    assert reranked == [HOT_CAR]
    # A latency bound under 20 ms keeps the fast profile, and says so.
    bound = retrieve(TwoRankings(lexical, dense), HOT_CAR, "auto", max_latency_ms=10)
    assert bound.applied == "balanced" and "max_latency_ms=10 keeps it" in bound.reason
    # Asked for explicitly, balanced stays balanced.
    assert retrieve(TwoRankings(lexical, dense), HOT_CAR, "balanced").applied == "balanced"


def test_auto_keeps_the_fast_profile_when_the_rankings_agree() -> None:
    lexical = [c.with_score(0.9 - i / 20) for i, c in enumerate(CHUNKS)]
    dense = [c.with_score(0.8 - i / 20) for i, c in enumerate(CHUNKS)]
    result = retrieve(TwoRankings(lexical, dense), HOT_CAR, "auto", reranker=None)
    assert result.applied == "balanced" and "escalated" not in result.reason
    # Agreeing but both unsure at the top: escalate.
    weak_lexical = [c.with_score(0.3 - i / 40) for i, c in enumerate(CHUNKS)]
    weak_dense = [c.with_score(0.4 - i / 40) for i, c in enumerate(CHUNKS)]
    unsure = retrieve(TwoRankings(weak_lexical, weak_dense), HOT_CAR, "auto", reranker=None)
    assert unsure.applied == "deep" and "both rankings are unsure" in unsure.reason
