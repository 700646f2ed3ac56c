"""Citation tags: how chunks are shown to models, and how their citations are read back.

A chunk is shown as `[KB#mem_3f2a] [Score: 0.85] Heading > Path: text`. Models cite it by tag.

Forgery: chunk text is untrusted (anyone can ingest a file), so before a chunk is shown,
anything in it that the citation parser would read as a tag is rewritten: `[KB#x]` becomes
`[KB-ref x]` and `[Score: 0.9]` becomes `[Score-ref: 0.9]`. The rewrite matches exactly the
openings the parser accepts (case-insensitive, spaces allowed: `[ kb # x]`), so
`parse_citations(neutralise(text)) == []` for every text.

Grouped citations: a model may write `[KB#mem_1, mem_2]` or `[KB#mem_1, KB#mem_2]`; both are
read as two citations. Ids are returned in first-appearance order, deduplicated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from collective.kb.store import Chunk

__all__ = ["format_chunk", "neutralise", "parse_citations", "resolve", "visible_chunks"]

_TAG_OPEN = re.compile(r"\[\s*KB\s*#", re.IGNORECASE)
_SCORE_OPEN = re.compile(r"\[\s*Score\s*:", re.IGNORECASE)
_CITATION = re.compile(r"\[\s*KB\s*#([^\[\]]*)\]", re.IGNORECASE)
_ITEM_PREFIX = re.compile(r"^KB\s*#\s*", re.IGNORECASE)
_ID = re.compile(r"^[A-Za-z0-9_.:\-]+$")


def neutralise(text: str) -> str:
    """Rewrite citation- and score-shaped text so it can never be parsed as a tag."""
    text = _TAG_OPEN.sub("[KB-ref ", text)
    return _SCORE_OPEN.sub("[Score-ref:", text)


def format_chunk(chunk: Chunk) -> str:
    """`[KB#id] [Score: 0.85] heading: text`, with the chunk's own text neutralised."""
    body = neutralise(chunk.text)
    if chunk.heading:
        body = f"{neutralise(chunk.heading)}: {body}"
    return f"[KB#{chunk.id}] [Score: {chunk.score:.2f}] {body}"


def parse_citations(text: str) -> list[str]:
    """The chunk ids cited in `text` (`[KB#id]`, or grouped `[KB#a, b]`), first-appearance order.

    Items that are not id-shaped (spaces inside, empty) are ignored.
    """
    ids: dict[str, None] = {}
    for match in _CITATION.finditer(text):
        for item in match.group(1).split(","):
            item = _ITEM_PREFIX.sub("", item.strip()).strip()
            if item and _ID.match(item):
                ids.setdefault(item, None)
    return list(ids)


def resolve(
    ids: Iterable[str], supplied: Mapping[str, Chunk]
) -> tuple[list[dict[str, str]], list[str]]:
    """Check cited ids against the chunks actually supplied to the model.

    Args:
        ids: Cited ids (duplicates are ignored).
        supplied: The chunks shown, by id.

    Returns:
        `(citations, unknown)`: `{id, source}` for each supplied id in order, and the ids that
        were cited but never supplied (hallucinated or forged).
    """
    citations: list[dict[str, str]] = []
    unknown: list[str] = []
    for cid in dict.fromkeys(ids):
        chunk = supplied.get(cid)
        if chunk is None:
            unknown.append(cid)
        else:
            citations.append({"id": cid, "source": chunk.source})
    return citations, unknown


def visible_chunks(chunks: Sequence[Chunk], hidden_tags: Iterable[str]) -> list[Chunk]:
    """The chunks a role may see: those carrying none of `hidden_tags` (case-insensitive).

    Proposers get `hidden_tags` from their role config (e.g. `{"meta"}`); the judge passes none.
    """
    hidden = {t.lower() for t in hidden_tags}
    return [c for c in chunks if not hidden.intersection(t.lower() for t in c.tags)]
