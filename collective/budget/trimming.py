"""Cutting content to a token budget: text, KB chunks, specialist proposals.

Every function returns what it kept *and* its token count under the same counter, so callers
never count twice. Counts of individual pieces are memoised by the counter, and content made of
pieces (chunks, proposals) is counted piecewise: each piece once, each join as its separator.
A join can merge a token at a boundary, so piecewise counts may differ from the joined text's
by a token per join; the assembler's exact count of the whole prompt is what guarantees the fit.

No tokenizer is ever sent much more text than the budget could show: a text far longer than its
budget (a 20 MB chunk in a KB) is first cut on characters to a part that already counts more
tokens than the budget (`TokenCounter.within_reach`), then counted and cut exactly. Where that
happened, the markers say the count is a lower bound (`[… 1234+ tokens trimmed …]`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from collective.budget.counting import TokenCounter

__all__ = [
    "Fitted",
    "Keep",
    "Scored",
    "select_chunks",
    "share_fairly",
    "trim_text",
]

Keep = Literal["start", "end", "both"]


@dataclass(frozen=True)
class Fitted:
    """Content cut to a budget."""

    text: str
    tokens: int
    trimmed: bool = False
    note: str = ""
    kept: tuple[str, ...] = ()
    """Keys of the pieces kept, for content made of pieces (KB chunks)."""
    shown: tuple[tuple[str, str], ...] = ()
    """Each piece kept with its text as shown (a trimmed one up to its trim marker), so a reader
    of the prompt (the claim check) is handed what each piece showed rather than parsing it."""
    own: str = ""
    """The caller's own part of the section (a member's KB slice, a role's part of its task),
    composed after every section's shared part, so sibling calls share one prefix; `tokens`
    counts it with `text`."""


@dataclass(frozen=True)
class Scored:
    """A piece of content with a relevance score (a rendered KB chunk, for instance)."""

    key: str
    text: str
    score: float
    mark: str = ""
    """Text that must survive whole for the piece to count as shown (a chunk's `[KB#id]` tag):
    a piece cut inside its mark is left out rather than kept."""


_MARKER_OPEN = "[… "


def _marker(n: int, more: bool = False) -> str:
    return f"{_MARKER_OPEN}{n}{'+' if more else ''} tokens trimmed …]"


def trim_text(counter: TokenCounter, text: str, max_tokens: int, keep: Keep = "start") -> Fitted:
    """Cut `text` to at most `max_tokens` on token boundaries, marking where it was cut.

    A text far longer than the budget is cut on characters first
    (`TokenCounter.within_reach`), so it is never counted whole.

    Args:
        counter: The model's counter.
        text: The text to fit.
        max_tokens: The budget.
        keep: Keep the `start`, the `end`, or `both` ends (the middle is cut).
    """
    if max_tokens <= 0:
        return Fitted("", 0, trimmed=bool(text))
    whole = text
    text = counter.within_reach([whole], max_tokens, keep)[0]
    more = len(text) < len(whole)
    total = counter.count(text)
    if total <= max_tokens and not more:
        return Fitted(text, total)
    budget = max_tokens
    while budget > 0:
        marker = _marker(total - budget, more)
        room = budget - counter.count(marker) - 1  # -1: the newline joining marker and text
        if room <= 0:
            piece = counter.head(text, budget) if keep != "end" else counter.tail(text, budget)
        elif keep == "start":
            piece = f"{counter.head(text, room)}\n{marker}"
        elif keep == "end":
            piece = f"{marker}\n{counter.tail(text, room)}"
        else:
            half = room // 2
            piece = f"{counter.head(text, room - half)}\n{marker}\n{counter.tail(text, half)}"
        used = counter.count(piece)
        if used <= max_tokens:
            return Fitted(piece, used, trimmed=True)
        budget -= max(1, used - max_tokens)  # a join merged differently: try a little smaller
    return Fitted("", 0, trimmed=True)


def select_chunks(
    counter: TokenCounter, chunks: Sequence[Scored], max_tokens: int, sep: str = "\n\n"
) -> Fitted:
    """Keep the highest-scoring subset of `chunks` that fits `max_tokens`.

    Chunks are taken best first; one that does not fit is skipped, not the end of the search (a
    smaller, lower-scored chunk may still fit). When the best chunk alone is larger than the
    whole budget it is trimmed rather than lost. When anything was dropped or cut, the text
    starts with `[Context trimmed to X/Y tokens, showing n/m chunks]`.

    Returns:
        The section text with its piecewise count; `kept` lists the keys of the chunks kept,
        best first (a trimmed chunk only when its `mark` survived the cut).
    """
    if not chunks or max_tokens <= 0:
        return Fitted("", 0, trimmed=bool(chunks))
    ranked = sorted(chunks, key=lambda c: -c.score)  # stable: ties keep the caller's order
    # A chunk far larger than the budget (a 20 MB one in an old KB) is never counted whole.
    texts = counter.within_reach([c.text for c in ranked], max_tokens)
    more = any(len(t) < len(c.text) for t, c in zip(texts, ranked, strict=True))
    costs = counter.count_many(texts)
    offered = sum(costs)
    sep_cost = counter.count(sep)
    # Reserve room for the header at its widest, so adding it can never overflow.
    widest = _header(offered, offered, len(ranked), len(ranked), more)
    header_cost = counter.count(widest) + sep_cost

    fits = offered + sep_cost * (len(ranked) - 1) <= max_tokens
    room = max_tokens if fits else max_tokens - header_cost
    kept: list[int] = []
    pieces: list[Fitted] = []
    shown: list[tuple[str, str]] = []
    for i, cost in enumerate(costs):
        need = cost + (sep_cost if kept else 0)
        if need <= room:
            kept.append(i)
            pieces.append(Fitted(ranked[i].text, cost))
            shown.append((ranked[i].key, ranked[i].text))
            room -= need
        elif i == 0:  # the best chunk alone is too big: trim it rather than lose it
            cut = trim_text(counter, ranked[0].text, room, keep="start")
            if cut.text and ranked[0].mark in cut.text:
                kept.append(0)
                pieces.append(cut)
                shown.append((ranked[0].key, cut.text.rsplit(_MARKER_OPEN, 1)[0].rstrip()))
                room -= cut.tokens
    if not pieces:
        return Fitted("", 0, trimmed=True)
    body = sep.join(p.text for p in pieces)
    used = sum(p.tokens for p in pieces) + sep_cost * (len(pieces) - 1)
    dropped = len(kept) < len(ranked) or any(p.trimmed for p in pieces)
    if dropped:
        header = _header(used, offered, len(kept), len(ranked), more)
        body = f"{header}{sep}{body}"
        used += counter.count(header) + sep_cost
    keys = tuple(ranked[i].key for i in kept)
    return Fitted(body, used, trimmed=dropped, kept=keys, shown=tuple(shown))


def _header(used: int, offered: int, shown: int, total: int, more: bool = False) -> str:
    offered_text = f"{offered}+" if more else str(offered)
    return f"[Context trimmed to {used}/{offered_text} tokens, showing {shown}/{total} chunks]"


def share_fairly(
    counter: TokenCounter, texts: Sequence[str], max_tokens: int, keep: Keep = "both"
) -> list[Fitted]:
    """Trim several texts (specialist proposals) to one shared budget, fairly.

    Each text is guaranteed at least an equal share; what a short text does not need is shared
    among the longer ones (water-filling), so nothing is cut that need not be. A text far
    longer than the whole budget is never counted whole (`TokenCounter.within_reach`).
    """
    n = len(texts)
    if n == 0:
        return []
    needs = counter.count_many(counter.within_reach(texts, max_tokens, keep))
    shares = [0] * n
    left, pending = max(0, max_tokens), sorted(range(n), key=lambda i: needs[i])
    while pending:
        fair = left // len(pending)
        i = pending.pop(0)
        shares[i] = min(needs[i], fair)
        left -= shares[i]
    return [trim_text(counter, t, s, keep=keep) for t, s in zip(texts, shares, strict=True)]
