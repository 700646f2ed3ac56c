"""Any LangChain `BaseRetriever` as a collective knowledge store.

Documents become chunks:

* id: derived from the content, source and heading like every other chunk id (stable across
  calls). An id the retriever supplies (`metadata["id"]`, `Document.id`) is never trusted, even
  when it starts with `mem_`: a document could claim another chunk's id, or carry one such as
  `"mem_a, mem_b"` that would read back as two citations;
* source: `metadata["source"]`, else `langchain:<retriever class>`;
* tags: `metadata["tags"]` (a list or a comma-separated string);
* score: `metadata["score"]` or `metadata["relevance_score"]` when the retriever supplies one
  in 0..1; otherwise the rank decides (`1 / (1 + 0.1 * rank)`, rank 0 first), because most
  retrievers return ordered documents without scores.

`BaseRetriever` has no lookup by id, so `get` answers from the chunks this adapter has returned
so far (enough for checking citations of chunks that were retrieved and shown).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from collective.kb.store import Chunk, chunk_id, rank_chunks

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

__all__ = ["RetrieverKnowledgeStore", "document_to_chunk"]


def _tags(raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    return tuple(dict.fromkeys(str(t).strip().lower() for t in items if str(t).strip()))


def document_to_chunk(document: Document, rank: int, default_source: str) -> Chunk:
    """Convert one retrieved document (see the module docstring for the mapping)."""
    meta = document.metadata or {}
    source = str(meta.get("source") or default_source)
    heading = str(meta.get("heading") or "")
    cid = chunk_id(document.page_content, source, heading)
    score = meta.get("score", meta.get("relevance_score"))
    if not (isinstance(score, int | float) and 0.0 <= score <= 1.0):
        score = 1.0 / (1.0 + 0.1 * rank)
    return Chunk(
        id=cid,
        text=document.page_content,
        source=source,
        tags=_tags(meta.get("tags")),
        score=float(score),
        heading=heading,
    )


class RetrieverKnowledgeStore:
    """A `KnowledgeStore` backed by a LangChain retriever (a vector store's, BM25, ...)."""

    def __init__(self, retriever: BaseRetriever) -> None:
        """Wrap `retriever`; it is called with `invoke(query)`."""
        self.retriever = retriever
        self._default_source = f"langchain:{type(retriever).__name__}"
        self._seen: dict[str, Chunk] = {}
        self._lock = threading.Lock()

    def search(self, query: str, k: int) -> list[Chunk]:
        """The retriever's documents for `query` as chunks, at most `k`, best first."""
        if not query.strip() or k <= 0:
            return []
        documents = self.retriever.invoke(query)
        chunks: dict[str, Chunk] = {}
        for rank, document in enumerate(documents):
            chunk = document_to_chunk(document, rank, self._default_source)
            if chunk.id not in chunks or chunks[chunk.id].score < chunk.score:
                chunks[chunk.id] = chunk
        ranked = rank_chunks(list(chunks.values()))[:k]
        with self._lock:
            for chunk in ranked:
                self._seen[chunk.id] = chunk.with_score(0.0)
        return ranked

    def get(self, chunk_id: str) -> Chunk | None:
        """A chunk returned by an earlier search, or None."""
        with self._lock:
            return self._seen.get(chunk_id)
