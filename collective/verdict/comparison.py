"""Which of several things is highest or lowest, read off the supported claims' figures.

A small judge copies the chunks' figures but does not compare them: asked which of nine metals
is densest, the 1.5B listed three densities and named none, and a sample named 6061-T6 "the
highest" at 2.70 g/cm3. When a question asks for the highest or lowest of several things
(`asked`), `extreme` compares the figures that supported claims state (the judge's and every
member's: a member may have read chunks the judge did not) and returns the claim with the
highest or lowest one, to lead the verdict with how many things it compared. It answers only
where the comparison is plain: the figures are of one kind (the one the question names or
leads up to) and about two or more things (a chunk's title; those the question names, where it
names some), one figure per thing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from collective.kb.chunking import HEADING_SEPARATOR, heading_root
from collective.kb.quantities import in_base_units, kinds_named, quantities
from collective.verdict.support import Claim

__all__ = ["Extreme", "asked", "extreme", "off_question", "thing"]

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
_FILLER = set(
    "which what who whose is are was does do did has have had the a an of or and at with for "
    "in on to by from than these those this that it its one ones most least more less".split()
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
    subject: str
    """The thing it is about (`thing`)."""
    direction: Direction
    compared: int
    """How many things' figures were compared."""
    asked_about: int
    """How many things the question names (0: it names none it has chunks on)."""

    @property
    def line(self) -> str:
        """The verdict's lead line: the direction, what was compared, the claim as it stands."""
        text = _BULLET.sub("", self.claim.text.strip())
        _, colon, sentence = text.partition(": ")
        if colon and self.subject.lower() in sentence.lower() and quantities(sentence):
            text = sentence  # a model's own framing ("X has the next highest ...: X has ...")
        if self.subject.lower() not in text.lower():  # "It has a density of ...": name it
            text = f"{self.subject}: {text}"
        named = f" ({self.asked_about} asked about)" if self.asked_about > self.compared else ""
        return f"{self.direction.capitalize()} of {self.compared} compared{named}: {text}"


_BULLET = re.compile(rf"^[-*•]?\s*(?:[^:\n]{{1,80}}{HEADING_SEPARATOR}[^:\n]{{1,80}}:\s*)?")
"""A bullet, and a chunk's heading copied before its sentence (`PA6 nylon > Print ...: `)."""


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def _figures(
    claim: Claim, direction: Direction, asked_words: set[str]
) -> dict[str, tuple[float, int]]:
    """Per kind, the claim's figure for it and how many of the question's words lead up to it.

    A figure's words are those since the figure before it: of several of one kind ("a nozzle
    temperature of 250-280 °C with the bed at 70-90 °C") the one after the question's own words
    counts ("bed"), else the first.
    """
    out: dict[str, tuple[float, int]] = {}
    since = 0
    for quantity in quantities(claim.text):
        before, since = claim.text[since : quantity.start], quantity.end
        if (read := in_base_units(quantity)) is None:
            continue
        kind, low, high = read
        near = len(_words(before) & asked_words)
        if kind not in out or near > out[kind][1]:
            out[kind] = (high if direction == "highest" else low, near)
    return out


def thing(heading: str, source: str) -> str:
    """What a chunk is about: its heading's first part (the document's title), else its file."""
    return heading_root(heading) or source


def _named(question: str, things: Iterable[str]) -> set[str]:
    """The things (`thing`) the question names, each as a whole word or phrase."""
    low = question.lower()
    return {t for t in things if re.search(rf"(?<!\w){re.escape(t.lower())}(?!\w)", low)}


def off_question(question: str, claims: Iterable[Claim], things: Mapping[str, str]) -> list[Claim]:
    """The cited claims about none of the two or more things `question` asks to rank.

    Asked "which is harder, white ash or teak?", a line citing only white oak's chunk answers
    another question. Only a question that asks for the highest or lowest (`asked`) of two or
    more things it names (`things`: what each chunk is about) has lines off it: "PLA or PETG for
    a hot car?" may well be answered with ASA.
    """
    named = _named(question, things.values())
    if asked(question) is None or len(named) < 2:
        return []
    return [c for c in claims if c.cited and not {things.get(i) for i in c.cited} & named]


def extreme(question: str, claims: Iterable[Claim], things: Mapping[str, str]) -> Extreme | None:
    """The supported claim with the highest or lowest figure `question` asks for, or None.

    Args:
        question: The question as asked.
        claims: The checked claims of every answer (the judge's and the members').
        things: What each chunk is about, by id: its heading's first part (`PA6 nylon` of
            `PA6 nylon > Print temperatures`), else its document. Where the question names two
            or more of them, only those are compared.
    """
    direction = asked(question)
    if direction is None:
        return None
    named = _named(question, things.values())
    # the words that say which figure: not the things', not a kind's (`temperature`), no filler
    asked_words = {w for w in _words(question) - _words(" ".join(named)) - _FILLER - _HIGH - _LOW
                   if not kinds_named(w)}  # fmt: skip
    by_kind: dict[str, dict[str, tuple[Claim, float, int]]] = {}
    for claim in claims:
        about = {things[i] for i in claim.cited if things.get(i)}
        if not claim.supported or len(about) != 1:
            continue
        (subject,) = about
        if len(named) >= 2 and subject not in named:
            continue
        for kind, (value, near) in _figures(claim, direction, asked_words).items():
            kept = by_kind.setdefault(kind, {}).get(subject)
            if kept is None or near > kept[2]:
                by_kind[kind][subject] = (claim, value, near)
    kinds = list(by_kind.keys() & kinds_named(question)) or list(by_kind)

    def weight(kind: str) -> tuple[int, int]:
        found = by_kind[kind].values()
        return sum(near > 0 for *_, near in found), len(found)

    kinds.sort(key=weight, reverse=True)
    if not kinds or (len(kinds) > 1 and weight(kinds[0]) == weight(kinds[1])):
        return None  # no figure, or two kinds alike: which one the question means is unclear
    compared = by_kind[kinds[0]]
    if len(compared) < 2:
        return None
    pick = max if direction == "highest" else min
    subject, (claim, value, _) = pick(compared.items(), key=lambda item: item[1][1])
    if sum(v == value for _, v, _ in compared.values()) > 1:
        return None  # a tie names no one thing
    asked_about = len(named) if len(named) >= 2 else 0
    return Extreme(claim, subject, direction, len(compared), asked_about)
