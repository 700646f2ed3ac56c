"""KB chunks as the nodes pass them around: JSON in state, `Chunk`s in a node, tags in prompts.

Graph state and `Send` payloads keep chunks as plain `Chunk` fields (what every checkpointer
stores, what a thread written before holds, what LangGraph's schemas show); a node turns them
into `Chunk`s once, on entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from collective.budget.trimming import Scored
from collective.kb.citations import format_chunk, tag, visible_chunks
from collective.kb.store import Chunk

__all__ = ["chunks_from_state", "chunks_to_state", "scored_chunks"]


def chunks_to_state(chunks: Iterable[Chunk]) -> list[dict[str, Any]]:
    """`Chunk`s as graph state keeps them (a shallow copy: the fields are flat and immutable)."""
    return [dict(vars(c)) for c in chunks]


def chunks_from_state(data: Iterable[Mapping[str, Any]]) -> list[Chunk]:
    """The `Chunk`s kept in graph state (tags come back from JSON as a list)."""
    return [Chunk(**{**c, "tags": tuple(c.get("tags", ()))}) for c in data]


def scored_chunks(chunks: Iterable[Chunk], hidden_tags: Sequence[str] = ()) -> list[Scored]:
    """Chunks a role may see, rendered `[KB#id] [Score: 0.85] text` for a chunks section."""
    visible = visible_chunks(list(chunks), hidden_tags)
    return [Scored(c.id, format_chunk(c), c.score, mark=tag(c.id)) for c in visible]
