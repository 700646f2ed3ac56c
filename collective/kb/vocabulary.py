"""What the KB knows of its things: every name a document goes by, and its figures by property.

This is the one place the rest of collective asks "which thing does this text name?" and "what
figures of this property does the KB hold?": retrieval, the claim check, the question's things
named and the comparisons all read a `Vocabulary`, never a list of names in code.

A store that learned its names and figures at ingest (the SQLite store) gives its own
(`VocabularySource`); any other store (a list of chunks, a retriever adapter) gets one read from
the chunks it is given (`collective.kb.names.chunk_vocabulary`), which knows each document by its
title and the short forms in it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from collective.kb.words import content_words

__all__ = ["Figure", "Named", "Thing", "Vocabulary", "VocabularySource"]


@dataclass(frozen=True)
class Thing:
    """One document of the KB: what its chunks are about, and every name it goes by."""

    key: str
    """Stable key: the document's source (its file path, or its label in other stores)."""
    title: str
    """Its title as written (the first part of its chunks' heading path)."""
    names: tuple[str, ...] = ()
    """Every name it goes by, the title first: short forms ("316", "C110", "copper"), trade
    names, acronyms, everyday names ("Teflon", "super glue"), and names a user added."""

    @property
    def words(self) -> frozenset[str]:
        """The content words of its every name: words that name it, not what is asked of it."""
        return frozenset(w for n in (self.title, *self.names) for w in content_words(n))


@dataclass(frozen=True)
class Named:
    """A thing a text names, and how."""

    thing: Thing
    written: str
    """The name as the text wrote it."""
    start: int
    """Where in the text (character offset)."""


@dataclass(frozen=True)
class Figure:
    """One figure a chunk states, typed by the property its own words name."""

    thing: str
    """The `Thing.key` it is about."""
    chunk_id: str
    """The chunk that states it."""
    property: str
    """The property's canonical name, lower case ("density", "janka hardness", "nozzle
    temperature"): two wordings of one property share it."""
    low: float
    high: float
    """The value or range in `unit` (`low == high` for a point value)."""
    unit: str
    """The property's one unit (pint's spelling), the same for every figure of a property."""
    text: str
    """The words of the chunk that state it (a sentence or clause, as written)."""


@runtime_checkable
class Vocabulary(Protocol):
    """The KB's names and figures."""

    def things(self) -> list[Thing]:
        """Every document the KB holds."""
        ...

    def thing_of(self, chunk_id: str) -> Thing | None:
        """The document a chunk belongs to (None for a chunk the KB does not hold)."""
        ...

    def named_in(self, text: str) -> list[Named]:
        """The things `text` names, in order, each by its longest matching name.

        A name matches as a whole word or phrase only ("PLA" is not in "PLA-CF"); a name two
        documents share ("PVA") goes to the one whose own words the text's other words fit
        ("PVA" with "wood": PVA wood glue), else to the one it is the title of, else to both.
        """
        ...

    def properties(self) -> list[str]:
        """Every property the KB has figures of, by canonical name."""
        ...

    def property_asked(self, text: str) -> str | None:
        """The property a question or phrase asks about ("lightest" of metals: density).

        None when it names none the KB has figures of, or does not say which of several.
        """
        ...

    def figures(self, property: str, things: Iterable[str] = ()) -> list[Figure]:
        """The figures of one property, of the `things` given (keys; all when empty)."""
        ...


@runtime_checkable
class VocabularySource(Protocol):
    """A store that knows its own vocabulary (learned at ingest)."""

    def vocabulary(self) -> Vocabulary:
        """The store's names and figures as they stand now."""
        ...
