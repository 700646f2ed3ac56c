"""Which of several things is highest or lowest on the property a question asks about.

A small judge copies the chunks' figures but does not compare them, and the words before a
number do not say what it measures ("cheapest" ranked densities, "lowest friction" service
temperatures). So a "which is highest/lowest/lightest/hardest" question is ranked here from the
KB's own figures (`Vocabulary.figures`), only of the property the question asks about
(`Vocabulary.property_asked`), of the things it names (by any name the KB knows for them; the
things of the chunks shown where it names fewer than two), in one unit, in the direction it
asks, its negation read ("which is not the densest"). With no figure of that property there is
no ranked lead: the verdict answers from what the chunks say in words ("cheap").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from collective.kb.citations import tag
from collective.kb.quantities import kinds_named
from collective.kb.vocabulary import Figure, Vocabulary
from collective.kb.words import HIGHER, LOWER, content_words

__all__ = ["Ranking", "asked", "compared_figures", "negated", "property_asked", "rank"]

Direction = Literal["highest", "lowest"]

_CHOICE = re.compile(r"\b(?:which|what|who)\b|\bthan\b")
_MORE, _LESS = {"more", "most"}, {"less", "least"}
"""Before a word of a quantity's kind ("more heat", "the least weight"): its direction."""
_NEGATED = re.compile(
    r"\b(?:not|isn't|aren't|never)\b(?:\s+\w+){0,2}?\s+(?:the\s+)?(?P<word>\w+)", re.IGNORECASE
)


def asked(question: str) -> Direction | None:
    """Whether `question` asks which thing is highest or lowest (`Which is denser, A or B?`).

    Only words that say the direction count: "more flexible" could mean a lower figure, "more
    heat" cannot (more of a quantity: `kinds_named`).
    """
    low = question.lower()
    if not _CHOICE.search(low):
        return None
    words = re.findall(r"[a-z]+", low)
    amounts = [(w, after) for w, after in zip(words, words[1:], strict=False) if kinds_named(after)]
    high = any(w in HIGHER for w in words) or any(w in _MORE for w, _ in amounts)
    lowest = any(w in LOWER for w in words) or any(w in _LESS for w, _ in amounts)
    if high == lowest:
        return None
    return "highest" if high else "lowest"


def property_asked(question: str, vocabulary: Vocabulary) -> str | None:
    """The property `question` asks about: the vocabulary's reading, else the one it names whole.

    `Vocabulary.property_asked` may find none where the property's whole name is the word of
    its kind ("the highest density"); a property every word of whose name the question uses,
    the only such one, is asked.
    """
    found = vocabulary.property_asked(question)
    if found is not None:
        return found
    words = set(content_words(question))
    whole = [p for p in vocabulary.properties() if set(content_words(p)) <= words]
    longest = max((len(content_words(p)) for p in whole), default=0)
    named = [p for p in whole if len(content_words(p)) == longest]
    return named[0] if len(named) == 1 else None


def negated(question: str) -> bool:
    """Whether the question asks which is *not* the highest or lowest ("not the densest")."""
    return any(m["word"].lower() in HIGHER | LOWER for m in _NEGATED.finditer(question))


@dataclass(frozen=True)
class Ranking:
    """The things compared on one property, the one asked for first."""

    measure: str
    """The property compared (its canonical name)."""
    direction: Direction
    order: tuple[Figure, ...]
    """One figure per thing, the highest (or lowest) first."""
    titles: Mapping[str, str]
    """Each thing's title, by key."""
    negated: bool = False
    """The question asks which is not the highest (lowest)."""
    unranked: tuple[str, ...] = ()
    """Things the question names that the KB holds no figure of this property for."""

    @property
    def lead(self) -> Figure:
        """The figure of the thing asked for (the extreme)."""
        return self.order[0]

    def line(self) -> str:
        """The verdict's lead: the direction, what was compared, the chunk's own words, tagged."""
        n = len(self.order)
        what = f"{self.direction.capitalize()} {self.measure} of {n} compared"
        first = f"{what}: {_said(self.lead, self.titles)} {tag(self.lead.chunk_id)}"
        if self.negated:
            rest = ", ".join(self.titles.get(f.thing, f.thing) for f in self.order[1:])
            first = f"Not the {self.direction} {self.measure}: {rest}. {first}"
        if self.unranked:
            first += f" (no {self.measure} figure for {', '.join(self.unranked)})"
        return first

    def others(self) -> list[str]:
        """The other things' figures, in order, each in its chunk's words and tagged."""
        return [f"{_said(f, self.titles)} {tag(f.chunk_id)}" for f in self.order[1:]]


def _said(figure: Figure, titles: Mapping[str, str]) -> str:
    """The figure's own words, its subject named where they do not name it."""
    text = figure.text.strip().rstrip(".")
    title = titles.get(figure.thing, "")
    if title and title.lower() not in text.lower():
        return f"{title}: {text}"
    return text


def rank(question: str, vocabulary: Vocabulary, shown_things: Iterable[str] = ()) -> Ranking | None:
    """The things `question` asks to rank, ranked on the property it asks about, or None.

    Args:
        question: The question as asked.
        vocabulary: The KB's names and figures.
        shown_things: The things of the chunks shown (keys): compared where the question names
            fewer than two things.
    """
    direction = asked(question)
    if direction is None:
        return None
    prop = property_asked(question, vocabulary)
    if prop is None:
        return None  # "cheapest", "lowest friction": no figure of it, no ranked lead
    named = list(dict.fromkeys(n.thing.key for n in vocabulary.named_in(question)))
    things = named if len(named) >= 2 else list(dict.fromkeys(shown_things))
    best: dict[str, Figure] = {}
    for figure in vocabulary.figures(prop, things):
        kept = best.get(figure.thing)
        if kept is None or _value(figure, direction) > _value(kept, direction):
            best[figure.thing] = figure
    if len(best) < 2:
        return None
    order = sorted(best.values(), key=lambda f: _value(f, direction), reverse=True)
    if _value(order[0], direction) == _value(order[1], direction):
        return None  # a tie names no one thing
    titles = {t.key: t.title for t in vocabulary.things()}
    unranked = tuple(titles.get(k, k) for k in named if k not in best) if len(named) >= 2 else ()
    return Ranking(prop, direction, tuple(order), titles, negated(question), unranked)


def _value(figure: Figure, direction: Direction) -> float:
    """The figure's end that ranks it (a range's high for the highest), signed to sort high."""
    return figure.high if direction == "highest" else -figure.low


def compared_figures(question: str, vocabulary: Vocabulary) -> list[Figure]:
    """The figures a ranking of `question`'s things reads (none where it asks no ranking).

    Of the property it asks to rank on, of every thing it names (by the KB's vocabulary).
    Retrieval brings a few chunks per question, and a prompt shows fewer: "which of these nine
    metals is densest" needs each one's density, and a ranking of the six shown names the wrong
    one (or ties). The KB knows which of its chunks hold them all.
    """
    if asked(question) is None or (prop := property_asked(question, vocabulary)) is None:
        return []
    named = list(dict.fromkeys(n.thing.key for n in vocabulary.named_in(question)))
    return vocabulary.figures(prop, named) if len(named) >= 2 else []
