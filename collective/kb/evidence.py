"""Split evidence: K council members read different parts of candidates too many for one.

In `shared` mode every member's KB section holds the best chunks that fit it, the same for all.
In `split` mode the chunks are shared out: each member keeps a *shared head* (the best chunks,
at most `HEAD_SHARE` of its section) and gets its own slice of the rest, dealt round-robin in
rank order, so slices never overlap. The chunks the shared mode would have shown every member
are dealt first, so the council as a whole never loses one of them, and each member's part is
fitted to its section like any chunks section (the budget invariant holds unchanged). `auto`
splits when the candidates do not fit one member's KB section, and says why.

The decision is made where the section's real limit is known: inside the prompt assembly
(`MemberEvidence.section`), from the limit the member's budget plan gives the KB section.
Members with the same plan and counter compute the same head and the same dealing.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from collective.budget.assembly import SectionContent
from collective.budget.counting import TokenCounter
from collective.budget.trimming import Fitted, Scored, select_chunks
from collective.kb.profile_names import EVIDENCE_MODES, Evidence

__all__ = [
    "EVIDENCE_MODES",
    "HEAD_SHARE",
    "Evidence",
    "EvidencePart",
    "SLICE",
    "MemberEvidence",
    "council_evidence",
    "seen_counts",
    "split",
]


SLICE = "## Your own slice of the knowledge base (only you see these chunks: report what they say)"
"""Heads a member's own chunks (`Fitted.own` of a split KB section), which the prompt puts after
the shared prefix (`collective.prompts.council.compose`)."""

HEAD_SHARE = 0.25
"""The largest share of a member's KB section the shared head may take (at least one chunk)."""


@dataclass(frozen=True)
class EvidencePart:
    """What one member is offered, and why."""

    mode: Literal["shared", "split"]
    head: tuple[str, ...] = ()
    """Keys of the shared head (every member gets them); split mode only."""
    own: tuple[str, ...] = ()
    """Keys of this member's own slice beyond the head, best first; split mode only."""
    offered: list[Scored] = field(default_factory=list)
    """The pieces to fit, in the order to take them (head, then the slice)."""
    reason: str = ""


def _ranked(chunks: Sequence[Scored]) -> list[Scored]:
    return sorted(chunks, key=lambda c: -c.score)  # stable, as `select_chunks` ranks them


def split(
    counter: TokenCounter,
    chunks: Sequence[Scored],
    limit: int,
    k: int,
    index: int,
    requested: Evidence = "auto",
) -> EvidencePart:
    """Member `index`'s part of `chunks` (of `k` members) for a KB section of `limit` tokens.

    Args:
        counter: The member's token counter.
        chunks: The candidates, scored (rendered chunks).
        limit: The tokens the member's KB section may take.
        k: Council members sharing the candidates.
        index: This member (0-based).
        requested: `shared`, `split`, or `auto` (split when the candidates do not fit).
    """
    ranked = _ranked(chunks)
    shared = select_chunks(counter, ranked, limit)
    fits = len(shared.kept) == len(ranked) and not shared.trimmed
    if requested == "auto":
        if fits or k < 2:
            why = f"fit one member's KB section of {limit}" if fits else "one member only"
            return EvidencePart(
                "shared", offered=ranked, reason=f"auto: shared ({len(ranked)} candidates {why})"
            )
        # A huge chunk (an old KB's) is counted only as far as the section could show it.
        texts = counter.within_reach([c.text for c in ranked], limit)
        cut = "+" if any(len(t) < len(c.text) for t, c in zip(texts, ranked, strict=True)) else ""
        reason = (
            f"auto: split ({len(ranked)} candidates, {sum(counter.count_many(texts))}{cut} "
            f"tokens, exceed one member's KB section of {limit}: {len(shared.kept)} fit)"
        )
    elif requested == "shared":
        return EvidencePart("shared", offered=ranked, reason="shared (requested)")
    else:
        reason = "split (requested)"
    kept = set(shared.kept)
    first = [c for c in ranked if c.key in kept]  # what shared mode shows this member
    head: list[Scored] = []
    room = int(limit * HEAD_SHARE)
    costs = counter.count_many(counter.within_reach([c.text for c in first], limit))
    for piece, cost in zip(first, costs, strict=True):
        if head and cost > room:
            break
        head.append(piece)
        room -= cost
    heads = {c.key for c in head}
    # A chunk is dealt by its rank among all the candidates (after the best, every member's
    # head), the same for every member whatever its window (members on other backends fit heads
    # of other sizes): each chunk has one owner, who sees it in its head or its slice, so none
    # is lost between members.
    k = max(k, 1)
    mine = [c for n, c in enumerate(ranked) if c.key not in heads and (n - 1) % k == index % k]
    own = [c for c in mine if c.key in kept] + [c for c in mine if c.key not in kept]
    offered = [*head, *own]
    # Ranked by position: the fitting keeps this order (head first, then the shared mode's
    # chunks of the slice), whatever the chunks' own scores.
    offered = [dataclasses.replace(c, score=float(len(offered) - i)) for i, c in enumerate(offered)]
    return EvidencePart(
        "split",
        head=tuple(c.key for c in head),
        own=tuple(c.key for c in own),
        offered=offered,
        reason=f"{reason}; member {index + 1}/{k}: head {len(head)} + own slice {len(own)}",
    )


class MemberEvidence:
    """A member's KB section under an evidence mode.

    The part is decided at the first fit, from the limit the member's plan gives its KB section
    (the same for members on one plan and counter, so their slices are dealt alike); a refit
    (the whole prompt ran over, or the server's context was smaller) fits the same part to the
    smaller limit rather than dealing anew.

    Args:
        chunks: The candidates the member may see.
        k: Council members sharing them.
        index: This member (0-based).
        requested: The evidence mode asked for.
    """

    def __init__(self, chunks: Sequence[Scored], k: int, index: int, requested: Evidence) -> None:
        self.chunks, self.k, self.index, self.requested = list(chunks), k, index, requested
        self.part: EvidencePart | None = None
        self.kept: tuple[str, ...] = ()
        """The chunks the last fit kept: what the member's prompt showed."""
        self.cut: dict[str, str] = {}
        """The chunks the last fit cut, each with its rendering as far as it was shown."""

    def section(self, name: str = "kb_chunks") -> SectionContent:
        """The section content: fits the member's part, with the split in the report's note."""
        return SectionContent(name, self._fit)

    def _fit(self, counter: TokenCounter, limit: int) -> Fitted:
        mark = counter.count(f"{SLICE}\n\n")
        if self.part is None:
            # `auto` decides on the whole section; a split part leaves room for the `SLICE` line
            args = (self.k, self.index, self.requested)
            self.part = split(counter, self.chunks, limit, *args)
            if self.part.mode == "split":
                self.part = split(counter, self.chunks, max(0, limit - mark), *args)
        if self.part.mode == "shared":
            return self._kept(select_chunks(counter, self.part.offered, limit))
        # in offered order (head, then the slice), whatever the scores say
        ordered = [dataclasses.replace(c, score=-i) for i, c in enumerate(self.part.offered)]
        fitted = self._kept(select_chunks(counter, ordered, max(0, limit - mark)))
        note = (
            f"split evidence, member {self.index + 1}/{self.k}: shared head "
            f"{len(self.part.head)} + own slice {len(self.part.own)} of {len(self.chunks)}"
        )
        head, own = self._parted(fitted)
        return dataclasses.replace(
            fitted, text=head, own=f"{SLICE}\n{own}", tokens=fitted.tokens + mark, note=note
        )

    def _kept(self, fitted: Fitted) -> Fitted:
        """`fitted`, its chunks and those it cut remembered (what the member's prompt showed)."""
        whole = {c.key: c.text for c in self.chunks}
        self.kept = fitted.kept
        self.cut = {key: text for key, text in fitted.shown if text != whole.get(key)}
        return fitted

    def _parted(self, fitted: Fitted) -> tuple[str, str]:
        """The fitted text as the shared head and the member's own part (`Fitted.own`).

        The pieces were fitted in offered order (head, then the slice), so the member's own
        chunks, never trimmed (only the best chunk, the head's first, may be), end the text. The
        own part is the trim header (it differs per member), then those chunks: the head is the
        same text for every member.
        """
        head = self.part.head if self.part else ()
        pieces = dict(fitted.shown)
        own = "\n\n".join(pieces[k] for k in fitted.kept if k not in head)
        text, header = fitted.text, ""
        if fitted.trimmed:
            header, _, text = text.partition("\n\n")
        shared = text.removesuffix(own).rstrip("\n") if own else text
        return shared, "\n\n".join(p for p in (header, own) if p)

    def summary(self, seen: Sequence[str]) -> dict[str, Any]:
        """The part as a proposal records it: mode, head, own slice, the chunks kept, reason.

        `cut` holds each chunk seen that the prompt cut, with its rendering as far as shown.
        """
        part = self.part or EvidencePart("shared")
        return {
            "mode": part.mode,
            "head": list(part.head),
            "own": list(part.own),
            "seen": list(seen),
            "cut": {key: text for key, text in self.cut.items() if key in seen},
            "reason": part.reason,
        }


def council_evidence(requested: str, proposals: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How the members read the chunks, for the run's output (`evidence` in `--json`).

    `applied` is `split` when any member read a split part; `reason` is the first member's;
    `members` gives per member the sizes of its head, own slice and the chunks it saw;
    `several` lists the chunks more than one member cited, `one_member` those cited by a
    member that alone saw them.
    """
    parts = [(p["member"], p.get("evidence") or {}) for p in proposals]
    applied = "split" if any(e.get("mode") == "split" for _, e in parts) else "shared"
    seen = Counter(i for _, e in parts for i in e.get("seen", ()))
    cited = Counter(i for p in proposals for i in p.get("citations", ()))
    return {
        "requested": requested,
        "applied": applied,
        "reason": next((e["reason"] for _, e in parts if e.get("reason")), ""),
        "members": [
            {
                "member": member,
                "mode": e.get("mode", "shared"),
                "head": len(e.get("head", ())),
                "own": len(e.get("own", ())),
                "seen": len(e.get("seen", ())),
            }
            for member, e in parts
        ],
        "several": [i for i, n in cited.items() if n > 1],
        "one_member": [i for i, n in cited.items() if n == 1 and seen[i] == 1],
    }


def seen_counts(proposals: Sequence[Mapping[str, Any]]) -> Counter[str]:
    """How many members' prompts showed each chunk."""
    return Counter(i for p in proposals for i in (p.get("evidence") or {}).get("seen", ()))
