"""The KB's vocabulary as far as the chunks shown reach: its names, and the figures they state.

A store that learned its names at ingest knows "Teflon" and "PMMA"; its figures may sit in
chunks retrieval did not bring, which a verdict cannot cite. So the verdict reads the store's
names whole and its figures only of the chunks shown.
"""

from __future__ import annotations

from collections.abc import Iterable

from collective.kb.vocabulary import Figure, Named, Thing, Vocabulary

__all__ = ["ShownVocabulary"]


class ShownVocabulary(Vocabulary):
    """`vocabulary` with its figures limited to the chunks `shown` (ids)."""

    def __init__(self, vocabulary: Vocabulary, shown: Iterable[str]) -> None:
        """A view of `vocabulary` over the chunks `shown`."""
        self.whole = vocabulary
        self.shown = frozenset(shown)

    def things(self) -> list[Thing]:
        """Every document the KB holds."""
        return self.whole.things()

    def thing_of(self, chunk_id: str) -> Thing | None:
        """The document a chunk belongs to."""
        return self.whole.thing_of(chunk_id)

    def named_in(self, text: str) -> list[Named]:
        """The things `text` names, by any name the KB knows."""
        return self.whole.named_in(text)

    def properties(self) -> list[str]:
        """The properties the chunks shown have figures of."""
        return [p for p in self.whole.properties() if self.figures(p)]

    def property_asked(self, text: str) -> str | None:
        """The property a question asks about (the KB's reading)."""
        return self.whole.property_asked(text)

    def figures(self, property: str, things: Iterable[str] = ()) -> list[Figure]:
        """The figures of one property the chunks shown state."""
        return [f for f in self.whole.figures(property, things) if f.chunk_id in self.shown]
