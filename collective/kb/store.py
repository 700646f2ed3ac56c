"""The knowledge-store interface: chunks with stable ids, and the protocol every store meets.

A chunk id is derived from the chunk's content and source (`mem_` + 16 hex digits of a SHA-256),
so ingesting the same text from the same source twice yields the same id: re-ingest is
idempotent and citations stay valid across rebuilds of the same files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

__all__ = ["Chunk", "DenseResult", "DenseStore", "KnowledgeStore", "chunk_id", "rank_chunks"]

ID_PREFIX = "mem_"


def chunk_id(text: str, source: str, heading: str = "") -> str:
    """The stable id of a chunk: `mem_` + 16 hex digits of SHA-256 over source, heading, text.

    Args:
        text: The chunk body.
        source: Where the chunk came from (file path or label).
        heading: The heading path the chunk sits under (part of its identity).

    Returns:
        An id such as `mem_3f2a9c0d1b7e4a55`.
    """
    digest = hashlib.sha256("\x1f".join((source, heading, text)).encode("utf-8")).hexdigest()
    return ID_PREFIX + digest[:16]


@dataclass(frozen=True)
class Chunk:
    """One retrievable piece of knowledge."""

    id: str
    """Stable id, `mem_...` (see `chunk_id`)."""
    text: str
    """The chunk body (without its heading path)."""
    source: str
    """Where it came from: a file path for ingested files, a label for other stores."""
    tags: tuple[str, ...] = ()
    """Lower-case tags, e.g. `("meta",)`; roles may hide some tags from proposers."""
    score: float = 0.0
    """Relevance to the query that found it, 0..1, higher is better (0 outside a search)."""
    heading: str = ""
    """The heading path the chunk sits under, e.g. `PETG > Drying` (empty when none)."""

    def with_score(self, score: float) -> Chunk:
        """A copy carrying `score` (clamped to 0..1)."""
        return replace(self, score=min(1.0, max(0.0, score)))


def rank_chunks(chunks: list[Chunk]) -> list[Chunk]:
    """Sort by score (descending), ties broken by id, so equal scores have a fixed order."""
    return sorted(chunks, key=lambda c: (-c.score, c.id))


@runtime_checkable
class KnowledgeStore(Protocol):
    """What retrieval needs from a knowledge store."""

    def search(self, query: str, k: int) -> list[Chunk]:
        """The best `k` chunks for `query`.

        Scores are normalised to 0..1 (higher is better) and the order is deterministic:
        by score, ties by id.
        """
        ...

    def get(self, chunk_id: str) -> Chunk | None:
        """The chunk with this id (score 0), or None if the store has none."""
        ...


@dataclass
class DenseResult:
    """What a dense (embedding) search found."""

    hits: list[Chunk] = field(default_factory=list)
    """The nearest chunks, score = cosine similarity (0..1), best first."""
    similarity: dict[str, float] = field(default_factory=dict)
    """Cosine similarity of the hits and of the other chunks asked about, by id."""
    note: str = ""
    """Why the search found nothing (no vectors, no model), or what is incomplete."""


@runtime_checkable
class DenseStore(KnowledgeStore, Protocol):
    """A store that can also search by embedding similarity (hybrid retrieval uses it)."""

    def dense_search(self, query: str, k: int, also: Sequence[str] = ()) -> DenseResult:
        """The `k` chunks nearest to `query`, and the similarity of the chunks `also` names."""
        ...
