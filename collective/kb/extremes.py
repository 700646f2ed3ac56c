"""Which of several things is highest or lowest, read off the supported claims' figures.

A small judge copies the chunks' figures but does not compare them: asked which of nine metals
is densest, the 1.5B listed three densities and named none, and a sample named 6061-T6 "the
highest" at 2.70 g/cm3. When a question asks for the highest or lowest of several things
(`asked`), `extreme` compares the figures that supported claims state (the judge's and every
member's: a member may have read chunks the judge did not) and returns the claim with the
highest or lowest one, to lead the verdict. It answers only where the comparison is plain: the
figures share one kind (the one the question names, else the one most claims state) and come
from at least two documents (the things compared), one figure per claim and one per document.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from collective.kb.quantities import in_base_units, kinds_named, quantities
from collective.kb.support import Claim

__all__ = ["Extreme", "asked", "extreme"]

Direction = Literal["highest", "lowest"]

_HIGH = set(
    "highest higher greatest greater largest larger biggest bigger maximum heaviest heavier "
    "densest denser hottest hotter warmest warmer strongest stronger hardest harder stiffest "
    "stiffer toughest tougher longest longer thickest thicker".split()
)
_LOW = set(
    "lowest lower smallest smaller minimum lightest lighter coolest cooler coldest colder "
    "weakest weaker softest softer cheapest cheaper thinnest thinner shortest shorter".split()
)
_CHOICE = re.compile(r"\b(?:which|what|who)\b|\bthan\b")


def asked(question: str) -> Direction | None:
    """Whether `question` asks which thing is highest or lowest (`Which is denser, A or B?`).

    Only words that say the direction count: "more flexible" could mean a lower figure.
    """
    low = question.lower()
    if not _CHOICE.search(low):
        return None
    words = re.findall(r"[a-z]+", low)
    high, lowest = any(w in _HIGH for w in words), any(w in _LOW for w in words)
    if high == lowest:
        return None
    return "highest" if high else "lowest"


@dataclass(frozen=True)
class Extreme:
    """The claim whose figure is the highest or lowest of those compared."""

    claim: Claim
    direction: Direction
    compared: int
    """How many documents' figures were compared."""

    @property
    def line(self) -> str:
        """The verdict's lead line: the direction, then the claim as its chunk states it."""
        return f"{self.direction.capitalize()}: {self.claim.text.strip()}"


def extreme(question: str, claims: Iterable[Claim], sources: Mapping[str, str]) -> Extreme | None:
    """The supported claim with the highest or lowest figure `question` asks for, or None.

    Args:
        question: The question as asked.
        claims: The checked claims of every answer (the judge's and the members').
        sources: The document of each chunk (`Chunk.source`), by id.
    """
    direction = asked(question)
    if direction is None:
        return None
    figures: list[tuple[Claim, str, str, float]] = []  # claim, document, kind, value
    for claim in claims:
        documents = {sources[i] for i in claim.cited if sources.get(i)}
        if not claim.supported or len(documents) != 1:
            continue
        (document,) = documents
        first: dict[str, float] = {}  # the first figure of each kind is the claim's own
        for quantity in quantities(claim.text):
            if (read := in_base_units(quantity)) is not None:
                kind, low, high = read
                first.setdefault(kind, high if direction == "highest" else low)
        figures += [(claim, document, kind, value) for kind, value in first.items()]
    named = kinds_named(question)
    by_kind: dict[str, dict[str, tuple[Claim, float]]] = {}
    for claim, document, kind, value in figures:
        by_kind.setdefault(kind, {}).setdefault(document, (claim, value))
    kinds = [k for k in by_kind if k in named] or list(by_kind)
    if not kinds:
        return None
    kind = max(kinds, key=lambda k: len(by_kind[k]))
    if len(kinds) > 1 and sorted(len(by_kind[k]) for k in kinds)[-2] == len(by_kind[kind]):
        return None  # two kinds as often stated: which one the question means is unclear
    compared = list(by_kind[kind].values())
    if len(compared) < 2:
        return None
    pick = max if direction == "highest" else min
    claim, value = pick(compared, key=lambda item: item[1])
    if sum(v == value for _, v in compared) > 1:
        return None  # a tie names no one thing
    return Extreme(claim, direction, len(compared))
