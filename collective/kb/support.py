"""Faithful citations: does the chunk a claim cites state the claim's numbers and names?

A *cited claim* is a sentence of an answer that cites at least one supplied chunk. It is
*supported* when every number in it appears in one of the chunks it cites (text, heading or
source) and, if it has name-like words (an acronym such as `PETG`, letters and digits mixed
such as `PA6`, `C360`, `6061-T6`), at least one of them does (a claim may name another entity
in passing: "unlike PLA"). This is a deterministic check, honest for what it checks: a claim
that says 240-260 °C where its chunk says 230-250 °C, or names only PA6 where the chunk is about
polypropylene, fails it; a claim whose words merely paraphrase its chunk passes it, and a
misnamed entity written in plain lower case (`nylon`) is not caught.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from collective.kb.citations import normalise, split_citations
from collective.kb.store import Chunk

__all__ = ["Claim", "cited_claims", "drop_claims", "support_share"]

_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?!\w)")
_NAME = re.compile(r"(?<![\w-])(?=[\w-]*[A-Z][\w-]*[A-Z0-9])(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w-]*")
_TAGS = re.compile(r"\[[^\]]*\]")
_BARE_TAG = re.compile(r"(?<![A-Za-z0-9])KB\s*#\s*\S+", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[^\s\[])")
_NOT_NAMES = frozenset({"KB", "I", "A"})


@dataclass(frozen=True)
class Claim:
    """One cited claim of an answer."""

    text: str
    """The sentence as written (tags included)."""
    cited: tuple[str, ...]
    """The supplied chunks it cites."""
    missing: tuple[str, ...]
    """Numbers and names it states that none of its cited chunks states."""

    @property
    def supported(self) -> bool:
        """Whether its cited chunks state everything it checks."""
        return not self.missing


def _value(number: str) -> float:
    return float(number.replace(",", ""))


def _facts(text: str) -> tuple[list[str], list[str]]:
    """The numbers and the name-like words of `text`, tags left out."""
    text = _BARE_TAG.sub(" ", _TAGS.sub(" ", normalise(text)))
    numbers = _NUMBER.findall(text)
    names = [n for n in _NAME.findall(text) if n not in _NOT_NAMES and not n.isdigit()]
    return numbers, names


def _named(name: str, lowered: str) -> bool:
    """`name` appears in `lowered` as a whole word: `PETG` is not named by `PETG-CF`."""
    return re.search(rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])", lowered) is not None


def _stated(name: str, lowered: str) -> bool:
    """`name` (or each name-like part of `PETG-like`, `6061-T6`) appears in `lowered`."""
    if _named(name, lowered):
        return True
    parts = [p for p in name.split("-") if _NAME.fullmatch(p) and p not in _NOT_NAMES]
    return (
        bool(parts) and len(parts) < len(name.split("-")) and all(_named(p, lowered) for p in parts)
    )


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        for piece in _SENTENCE.split(line):
            if out and piece.strip() and not _TAGS.sub("", piece).strip(" .,;"):
                out[-1] += f" {piece}"  # tags after the full stop belong to the sentence
            elif piece.strip():
                out.append(piece)
    return out


def cited_claims(text: str, supplied: Mapping[str, Chunk]) -> list[Claim]:
    """The sentences of `text` that cite supplied chunks, each checked against its chunks."""
    claims = []
    for sentence in _sentences(text):
        cited, _ = split_citations(sentence, supplied)
        if not cited:
            continue
        sources = " ".join(
            f"{supplied[i].heading} {supplied[i].text} {supplied[i].source}" for i in cited
        )
        stated = {_value(n) for n in _NUMBER.findall(sources)}
        lowered = sources.lower()
        numbers, names = _facts(sentence)
        missing = [n for n in numbers if _value(n) not in stated]
        # A claim may name another entity in passing ("unlike PLA"); it must name the one its
        # chunk is about: at least one of its names is stated there.
        if names and not any(_stated(n, lowered) for n in names):
            missing += names
        claims.append(Claim(sentence, tuple(cited), tuple(dict.fromkeys(missing))))
    return claims


def support_share(claims: Sequence[Claim]) -> float | None:
    """The share of `claims` that are supported; None when there are none."""
    return sum(c.supported for c in claims) / len(claims) if claims else None


def drop_claims(text: str, claims: Sequence[Claim]) -> str:
    """`text` without the sentences of `claims`; unchanged if nothing else would remain."""
    kept = text
    for claim in claims:
        kept = kept.replace(claim.text, "", 1)
    lines = [re.sub(r"\s{2,}", " ", line).rstrip() for line in kept.splitlines()]
    lines = [line for line in lines if line.strip(" -*•")]
    return "\n".join(lines) if lines else text
