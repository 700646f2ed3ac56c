"""Things a question names by what the KB says of them: "the wood used for baseball bats".

A question may ask a property of a thing it does not name but describes by its use ("What bed
temperature does the filament used for dissolvable ABS supports need?"): the answer is two hops
away, the thing from the chunk that says what it is used for, then that thing's figure. A small
judge answers for the neighbour the words lead to (ABS's bed temperature, hard maple's density).
Here the description is matched against the sentences of the chunks retrieved: the thing whose
sentence holds the description's first word (the one next to "used for": the question's own
words run on after the description, "the knife used for prying dishwasher safe") and shares
the most of its words, alone at the top and of the kind the question says ("wood": a word of
its name, heading or folder), is the thing described. Names the description holds ("ABS" of "ABS
supports") describe; they are not what is asked about.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from collective.kb.vocabulary import Vocabulary
from collective.kb.words import content_words
from collective.verdict.support import Shown, plain

__all__ = ["Described", "described"]

_DESCRIBED = re.compile(
    r"\b(?:the|a|an)\s+(?P<kind>[^\W\d_]+(?:\s+[^\W\d_]+){0,2}?)\s+"
    r"(?:(?:(?:that|which)\s+(?:is|are|gets?)\s+)?(?:used|meant|made|sold)\s+(?:for|in|as|to)|for)"
    r"\s+(?P<use>.+?)(?=\s+(?:or|and|vs|versus)\s+(?:the|an?)\b|[?.;:!]|$)",
    re.IGNORECASE,
)
"""A thing described by its use: "the <kind> (that is) used for|in|as <use>" or "the <kind> for
<use>", up to the next thing listed ("... or the stainless steel used for kitchen sinks") or the
question's end; the kind in up to three words ("the plastic sheet used for riot shields")."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\[])")


@dataclass(frozen=True)
class Described:
    """A thing a question describes, and the chunk sentence that says so."""

    thing: str
    """Its `Thing.key`."""
    chunk_id: str
    sentence: str
    span: tuple[int, int]
    """Where the question describes it."""


def described(
    question: str, shown: Iterable[Shown], vocabulary: Vocabulary, prop: str | None = None
) -> list[Described]:
    """The things `question` describes by their use, found in the chunks `shown`.

    Args:
        question: The question.
        shown: The chunks retrieved for it, as shown.
        vocabulary: The KB's names (each chunk's thing).
        prop: The property the question asks (its words are no part of a use).
    """
    chunks = list(shown)
    asked = set(content_words(prop or ""))
    out: list[Described] = []
    for m in _DESCRIBED.finditer(question):
        words = [w for w in content_words(m["use"]) if w not in asked]
        use, kind = set(words), set(content_words(m["kind"]))
        if not use or not kind:
            continue
        best: dict[str, tuple[int, str, str]] = {}
        for chunk in chunks:
            thing = vocabulary.thing_of(chunk.id)
            if thing is None:
                continue
            of = f"{chunk.source} {chunk.heading} {thing.title} {' '.join(thing.names)}"
            if not kind <= set(content_words(of.replace("/", " ").replace("_", " "))):
                continue
            for sentence in _SENTENCE_END.split(plain(chunk.text)):
                said = set(content_words(sentence))
                shared = len(use & said) if words[0] in said else 0
                if shared > best.get(thing.key, (0, "", ""))[0]:
                    best[thing.key] = (shared, chunk.id, sentence.strip())
        if not best:
            continue
        top = max(s for s, _, _ in best.values())
        leaders = [(key, found) for key, found in best.items() if found[0] == top]
        if len(leaders) == 1:  # two things used alike: the description names neither
            key, (_, chunk_id, sentence) = leaders[0]
            out.append(Described(key, chunk_id, sentence, (m.start(), m.end())))
    return out
