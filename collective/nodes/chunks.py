"""KB chunks as the nodes pass them around: plain dicts in state, tagged text in prompts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from collective.budget.trimming import Scored
from collective.kb.citations import format_chunk, tag, visible_chunks
from collective.kb.store import Chunk

__all__ = ["chunk_from_dict", "scored_chunks"]


def chunk_from_dict(data: dict[str, Any]) -> Chunk:
    """Rebuild a `Chunk` kept in graph state (tags come back from JSON as a list)."""
    return Chunk(**{**data, "tags": tuple(data.get("tags", ()))})


def scored_chunks(
    chunks: Iterable[dict[str, Any]], hidden_tags: Sequence[str] = ()
) -> list[Scored]:
    """Chunks a role may see, rendered `[KB#id] [Score: 0.85] text` for a chunks section."""
    visible = visible_chunks([chunk_from_dict(c) for c in chunks], hidden_tags)
    return [Scored(c.id, format_chunk(c), c.score, mark=tag(c.id)) for c in visible]
