"""Claims checked for what they mean: does a chunk the model was shown state this sentence?

A *claim* is a sentence of an answer that states a number or names an entity, cited or not.
Each is checked against the text of its cited chunks *as the model was shown them* (a trimmed
chunk only by what was kept), and against every other chunk shown:

- **Quantities** are read with their units (`collective.kb.quantities`) and compared by value
  after conversion. Each must be stated by one sentence of the chunk, and bound there to the
  same thing: a word next to it in the claim (`bed`, `dry`) that the chunk ties to another of its
  quantities (`the bed at 95-110 °C`, `dry at 45-50 °C`) means the number was taken from
  elsewhere.
- **Entities** (names such as `PETG`, `PA6`, `6061-T6`, and the things the chunks' headings are
  about: `polypropylene`, `316 stainless steel`) must be stated by the chunk, and be what the
  sentence that supports the claim is about: `ASA softens near 60 °C` is not supported by `PLA
  softens near 60 °C ... unlike ASA`. A name after `unlike`, `than`, `compared with` is named in
  passing and need not be.
- **Words**: at least half of the claim's content words are the chunk's (light stemming), so a
  paragraph about nylon under an ABS tag does not pass because it names ABS.
- **Negation** that differs between the claim and its supporting sentence, or numbers that hold
  in other words, cannot be settled by numbers and names: it goes to `entail`, the judge's own
  model asked whether the passage supports the claim (yes/no log-odds,
  `collective.verdict.entailment`); without one (the default) the claim fails.

A cited claim its chunk does not support but another shown chunk does is *retagged* to that
chunk; an uncited claim a shown chunk supports gets its tag; what nothing supports is
*dropped* (an uncited sentence that states no number stays, marked `uncited`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from collective.kb.chunking import MAX_CHUNK_CHARS
from collective.kb.citations import (
    format_chunk,
    neutralise,
    normalise,
    split_citations,
    tag,
    without_tags,
)
from collective.kb.quantities import Quantity, convert, kind_words, quantities, same_quantity
from collective.kb.store import Chunk
from collective.kb.vocabulary import Vocabulary
from collective.kb.words import STOPWORDS, stem

__all__ = [
    "Claim",
    "Entail",
    "Shown",
    "Similar",
    "Status",
    "answer_entities",
    "as_shown",
    "check_claims",
    "mark_fixed",
    "plain",
    "revise",
    "shown_whole",
    "support_share",
]

Status = Literal["supported", "retagged", "fixed", "dropped", "uncited"]

Entail = Callable[[Sequence[tuple[str, str]]], Sequence[float]]
"""Scores `(claim, passage)` pairs: log-odds that the passage supports the claim."""

Similar = Callable[[Sequence[str], Sequence[str]], Sequence[Sequence[float]]]
"""Cosine similarities of claims (rows) to passages (columns): the KB's embedding model."""

_BRACKETS = re.compile(r"\[[^\]]*\]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[^\s\[])")
_NAME = re.compile(r"(?<![\w-])(?=[\w-]*[A-Z][\w-]*[A-Z0-9])(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w-]*")
_NOT_NAMES = frozenset({"KB", "I", "A", "OK"})
_ALSO_NAMED = re.compile(r"([^()]+?)\s*\(([^()]+)\)")
"""A heading's name with another in brackets: `PLA (polylactic acid)`."""
_WORDS = re.compile(r"[a-z][a-z'’]*")
_CLAUSE = re.compile(r"[,;:()–—]|\s-\s|\bwhile\b|\bwhereas\b|\bbut\b")
_CONTRAST = re.compile(
    r"\b(?:unlike|than|compared (?:with|to)|instead of|rather than|versus|vs\.?|over|"
    r"similar to|like|except|beside|besides|not|nor)\s+(?:\w+\s+){0,2}$",
    re.IGNORECASE,
)
_NEGATIONS = frozenset(
    "not no never none cannot without neither nor nothing n't don't doesn't didn't isn't aren't "
    "wasn't weren't won't can't shouldn't couldn't mustn't".split()
)
_COMPARING = frozenset("more most".split())
"""Function words that state a comparison ("more than", "the most"): the check reads them."""
_STOP = (STOPWORDS - _COMPARING) | frozenset(
    """also now yes one two three use used uses using usual usually choose choice chosen option
    options pick recommend recommended suitable suit suits answer question part parts thing
    things make makes made need needs needed may might must often typical typically around near
    roughly approximately like unlike instead whereas however therefore thus since per many
    much get gets getting give gives window wide range span difference""".split()
)
"""Words a claim may use that its chunk need not: the project's function words
(`collective.kb.words`), less those that compare, and the words an answer frames a fact with."""
_DECISION = re.compile(r"\s*Decision:", re.IGNORECASE)
_MIN_WORD_SHARE = 0.5
"""Of a claim's content words, the share its chunk must hold."""
_RETAG_WORD_SHARE = 2 / 3
"""The share a chunk the claim did not cite must hold for the claim to be retagged to it."""


@dataclass(frozen=True)
class Shown:
    """A chunk as a model's prompt showed it."""

    id: str
    heading: str
    text: str
    """The body as shown: a trimmed chunk only by what was kept."""
    source: str = ""

    @property
    def whole(self) -> str:
        """Heading and body, as one text."""
        return f"{self.heading}: {self.text}" if self.heading else self.text


@dataclass(frozen=True)
class Claim:
    """One claim of an answer and what the check made of it."""

    text: str
    """The sentence as it stands (tags included)."""
    cited: tuple[str, ...]
    """The shown chunks it cites (after a retag, the chunk it now cites)."""
    status: Status
    reason: str
    missing: tuple[str, ...] = ()
    """What it states that its cited chunks do not (numbers, names, words)."""
    written: str = ""
    """The sentence as the model wrote it, where the check changed it (a retag)."""
    stated_as: tuple[tuple[str, str], ...] = ()
    """Of a claim dropped though its chunk holds every number it gives of its thing, in other
    words (with no entailment check to settle them) or tied to other words ("the build plate
    at 70-90 °C" of "the bed at 70-90 °C"): each such chunk (id), with the sentences that do."""

    @property
    def supported(self) -> bool:
        """Whether a chunk it cites states it."""
        return self.status in ("supported", "retagged", "fixed")

    def to_dict(self) -> dict[str, object]:
        """The claim as `--json`'s `claims` lists it."""
        return {
            "text": plain(self.text),
            "cited": list(self.cited),
            "status": self.status,
            "reason": self.reason,
        }


def plain(text: str) -> str:
    """`text` normalised, without its citation tags, bare or bracketed, or other bracketed notes."""
    return _untagged(normalise(text)).strip()


def _untagged(text: str) -> str:
    return re.sub(r"\s{2,}", " ", without_tags(_BRACKETS.sub(" ", text), bare=True))


def shown_whole(
    supplied: Mapping[str, Chunk], ids: Iterable[str] | None = None
) -> dict[str, Shown]:
    """Each chunk of `ids` (all supplied: None) as a prompt shows it whole.

    Whole as far as a prompt could show it: an old KB's chunk can be 20 MB, so its first
    `MAX_CHUNK_CHARS`. What a fitted prompt showed of a chunk comes from its fit instead
    (`Fitted.shown`, through `as_shown`).
    """
    out: dict[str, Shown] = {}
    for i in dict.fromkeys(supplied if ids is None else ids):
        if (chunk := supplied.get(i)) is not None:
            out[i] = Shown(
                i, chunk.heading, neutralise(chunk.text[:MAX_CHUNK_CHARS]).strip(), chunk.source
            )
    return out


def as_shown(chunk: Chunk, rendered: str) -> Shown:
    """`chunk` as a prompt showed it, from its rendering there (`format_chunk`, maybe cut).

    The rendering's opening (tag, score, heading) is known, so it is taken off as made; a cut
    rendering keeps only what was shown of the body.
    """
    whole = format_chunk(chunk)
    body = neutralise(chunk.text)
    opening = whole[: len(whole) - len(body)] if whole.endswith(body) else ""
    text = rendered[len(opening) :] if opening and rendered.startswith(opening) else rendered
    return Shown(chunk.id, chunk.heading, text.strip(), chunk.source)


# -- reading ------------------------------------------------------------------------------


def _key(phrase: str) -> str:
    return re.sub(r"[^0-9a-z]", "", phrase.lower())


@dataclass
class _Vocabulary:
    """The entities the chunks are about, by key (`petg`, `pa6nylon`, `nylon`).

    With the KB's `Vocabulary` (`kb`) the entities are its things, by `Thing.key`, named by any
    name the KB knows for them; a name two things share is one entity of both keys (`a|b`).
    Without one, the entities are read off the chunks' headings.
    """

    keys: set[str] = field(default_factory=set)
    longest: int = 1
    aliases: dict[str, str] = field(default_factory=dict)
    """Another name of an entity, and its own key (`polylacticacid`: `pla`)."""
    kb: Vocabulary | None = None

    def add(self, phrase: str) -> None:
        words = phrase.split()
        if not words or len(words) > 4:
            return
        if named := _ALSO_NAMED.fullmatch(phrase.strip()):  # `PLA (polylactic acid)`: one entity
            self.add(named[1])
            for other in (phrase, named[2]):
                self.aliases[_key(other)] = _key(named[1])
                self.longest = max(self.longest, len(other.split()))
            return
        self.keys.add(_key(" ".join(words)))
        self.longest = max(self.longest, len(words))
        head = words[-1]
        if len(words) > 1 and re.fullmatch(r"[A-Za-z][a-z]+", head) and head.lower() not in _STOP:
            self.keys.add(_key(head))  # `nylon` of `PA6 nylon`

    def spans(self, text: str) -> list[tuple[str, int, int]]:
        """The entities `text` names: (key, start, end), longest phrase first."""
        if self.kb is not None:
            return _kb_spans(self.kb, text)
        tokens = list(re.finditer(r"\w[\w.-]*\w|\w", text))
        out: list[tuple[str, int, int]] = []
        i = 0
        while i < len(tokens):
            for n in range(min(self.longest, len(tokens) - i), 0, -1):
                start, end = tokens[i].start(), tokens[i + n - 1].end()
                key = _key(text[start:end])
                key = self.aliases.get(key, key)
                if key and not key.isdigit() and key in self.keys:
                    out.append((key, start, end))
                    i += n
                    break
            else:
                i += 1
        return out


def _kb_spans(kb: Vocabulary, text: str) -> list[tuple[str, int, int]]:
    """The things the KB's vocabulary finds in `text`, one entity per span (`a|b`: shared)."""
    by_span: dict[tuple[int, int], list[str]] = {}
    for named in kb.named_in(text):
        span = (named.start, named.start + len(named.written))
        by_span.setdefault(span, []).append(named.thing.key)
    return [("|".join(sorted(set(keys))), a, b) for (a, b), keys in sorted(by_span.items())]


def _alternatives(key: str) -> set[str]:
    """The things an entity key stands for (a name two things share is either)."""
    return set(key.split("|"))


def _vocabulary(headings: Iterable[str], kb: Vocabulary | None = None) -> _Vocabulary:
    """The entities named by the first part of `headings` (`ABS and ASA > Printing` names two)."""
    vocab = _Vocabulary(kb=kb)
    for heading in headings:
        for phrase in re.split(r",|/|&|\band\b|\bor\b|\bvs\.?\b", heading.split(">")[0]):
            vocab.add(phrase)
    return vocab


@dataclass(frozen=True)
class _Read:
    """A text read for the check: its entities, quantities and content words."""

    text: str
    entities: tuple[tuple[str, int, int, bool], ...]
    """(key, start, end, named in passing: after `unlike`, `than`, ...)."""
    quantities: tuple[Quantity, ...]
    words: tuple[tuple[str, int, int], ...]
    """Content words (stemmed) with their spans: not entities, numbers or units."""

    def named(self, *, in_passing: bool = True) -> set[str]:
        return {k for k, _, _, passing in self.entities if in_passing or not passing}

    def said(self, key: str) -> str:
        """How the text names the entity `key` first."""
        return next(self.text[a:b] for k, a, b, _ in self.entities if k == key)

    @property
    def stems(self) -> set[str]:
        return {w for w, _, _ in self.words}

    @property
    def negated(self) -> bool:
        return _negated(self.text)


def _blank(text: str, spans: Iterable[tuple[int, int]]) -> str:
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


_GLUED_DEGREES = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)\s?([CF])(?![\w°'’-])")
"""A temperature written without its degree sign (`400C`, `260 C`): read as `400 °C`."""

_LABEL = re.compile(r"^\s*([^:.!?\n]{2,80}?):\s+(?=\S)")
"""A label before a statement (`Outdoor durability of balsa: not durable.`, `Decision: ...`)."""


def _label_end(text: str) -> int:
    """Where the statement of `text` starts after its label (0: it has none)."""
    m = _LABEL.match(text)
    return m.end() if m and len(m.group(1).split()) <= 8 else 0


def _read(text: str, vocab: _Vocabulary) -> _Read:
    text = _GLUED_DEGREES.sub(r"\1 °\2", plain(text))
    phrases = vocab.spans(text)
    found = quantities(_blank(text, [(a, b) for _, a, b in phrases]))
    rest = _blank(text, [(a, b) for _, a, b in phrases] + [(q.start, q.end) for q in found])
    names = list(phrases)
    for m in _NAME.finditer(rest):
        if m.group(0) not in _NOT_NAMES and not m.group(0).isdigit():
            names.append((_key(m.group(0)), m.start(), m.end()))
    names.sort(key=lambda n: n[1])
    entities = tuple((k, a, b, bool(_CONTRAST.search(text[:a]))) for k, a, b in names)
    rest = _blank(rest, [(a, b) for _, a, b in names])
    words = tuple(
        (stem(m.group(0)), m.start(), m.end())
        for m in _WORDS.finditer(rest.lower())
        if len(m.group(0)) >= 3 and m.group(0) not in _STOP and m.group(0) not in _NEGATIONS
    )
    return _Read(text, entities, found, words)


def _negated(text: str) -> bool:
    words = set(re.findall(r"[a-z']+", text.lower().replace("’", "'")))
    return bool(words & _NEGATIONS) or any(w.endswith("n't") for w in words)


_INNER_TAG = re.compile(r"(?<=\])(?=[,;]?\s+(?!\[)\w)")
"""After a tag that ends a clause inside a sentence: its clauses cite chunks of their own."""


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        pieces = [p for s in _SENTENCE.split(line) for p in _INNER_TAG.split(s)]
        for piece in pieces:
            if out and piece.strip() and not _BRACKETS.sub("", piece).strip(" .,;"):
                out[-1] += f" {piece}"  # tags after the full stop belong to the sentence
            elif piece.strip():
                out.append(piece)
    return out


def _clauses(text: str) -> list[tuple[int, int]]:
    cuts = list(_CLAUSE.finditer(text))
    starts = [0, *(m.end() for m in cuts)]
    ends = [m.start() for m in cuts] + [len(text)]
    return list(zip(starts, ends, strict=True))


def _clause_of(text: str, at: int) -> tuple[int, int]:
    return next(((a, b) for a, b in _clauses(text) if a <= at < b), (0, len(text)))


# -- one claim against one chunk -----------------------------------------------------------


@dataclass(frozen=True)
class _Finding:
    verdict: Literal["yes", "no", "unsure"]
    missing: tuple[str, ...] = ()
    why: str = ""
    share: float = 0.0
    """The share of the claim's content words the chunk holds."""
    stating: str = ""
    """Where its numbers hold in other words, or are held tied to other words: the chunk's
    sentences that hold them."""


_TIE_CHARS = 40
"""How far from a quantity (characters) a word of its clause is tied to it."""


def _distance(q: Quantity, start: int, end: int) -> int:
    # A word before a quantity belongs to it a little more than one after ("melts over 600 °C").
    return max(0, q.start - end, start - q.end + 4)


def _ties(read: _Read) -> list[tuple[str, Quantity]]:
    """Each content word of `read` with the quantity it belongs to.

    That is the nearest quantity in the word's clause, within `_TIE_CHARS`.
    """
    out = []
    for word, start, end in read.words:
        a, b = _clause_of(read.text, start)
        near = [q for q in read.quantities if a <= q.start < b]
        if near:
            q = min(near, key=lambda q: _distance(q, start, end))
            if _distance(q, start, end) <= _TIE_CHARS:
                out.append((word, q))
    return out


def _whole_sentences(pieces: Sequence[str], at: Iterable[int]) -> str:
    """The sentences of a chunk's `pieces` (split at ";" too) that hold the pieces `at`."""
    keep: set[int] = set()
    for n in at:
        first, last = n, n
        while first > 0 and pieces[first - 1].rstrip().endswith(";"):
            first -= 1
        while last < len(pieces) - 1 and pieces[last].rstrip().endswith(";"):
            last += 1
        keep.update(range(first, last + 1))
    return " ".join(pieces[k] for k in sorted(keep))


_NO_THING = "names no thing of the chunk"
"""Why a claim that names no thing is not its chunk's: words the chunk lacks stand for one."""


def _judge(
    claim: _Read, chunk: Shown, sentences: Sequence[_Read], heading: _Read, vocab: _Vocabulary
) -> _Finding:
    """What `chunk` (read as `sentences`) says of `claim`: quantities, entities, words, negation.

    Every content word of the claim must be the chunk's (a word that only names a stated
    quantity's kind aside): an antonym ("weldable" of "unweldable", "strong" of "weak"), a
    comparative turned round ("more" of "less"), an item added to a list are words the chunk
    does not hold. `unX` and `not X` are one word, negated, wherever the other text says X.
    """
    written = [s.text for s in sentences]
    sentences = [_read(t, vocab) if (t := _unprefixed(s.text, claim.text)) != s.text else s
                 for s in sentences]  # fmt: skip
    held = heading.stems.union(*(s.stems for s in sentences))
    chunk_text = " ".join([heading.text, *(s.text for s in sentences)])
    if (text := _unprefixed(claim.text, chunk_text)) != claim.text:
        claim = _read(text, vocab)
    anchors, missing, held_apart, apart = _quantities_stated(claim, sentences)
    stating = _whole_sentences(written, anchors | held_apart)
    words = [w for w, _, _ in claim.words]
    if claim.quantities and not missing:  # a word that only names a stated quantity's kind
        held |= {stem(w) for q in claim.quantities for w in kind_words(q)}
    share = sum(w in held for w in words) / len(words) if words else 1.0
    novel = [w for w in dict.fromkeys(words) if w not in held]
    if (label := _label_end(claim.text)) and claim.text[:label].strip().lower() != "decision:":
        # "Gap filling with X: fills gaps": what it states after its label, the chunk must state
        # after its own ("none; needs flat mating surfaces"), not in its heading-like label
        stated = set().union(*(_statement_stems(s) for s in sentences))
        novel += [w for w, start, _ in claim.words
                  if start >= label and w not in stated and w not in novel]  # fmt: skip
    numbers_hold = bool(claim.quantities) and not missing
    if novel and not numbers_hold:
        missing.append("words: " + ", ".join(novel[:6]))
    elif novel and not claim.named(in_passing=False):
        # it names no thing, and words the chunk lacks: a name the KB has no document for
        # ("Hickory has a density of about 0.67 g/cm3" of white ash's sentence) is no subject
        # of another document's sentence, whatever entailment would make of it
        written = [claim.text[a:b] for w, a, b in claim.words if w in novel]
        missing.append(f"{_NO_THING}: " + ", ".join(dict.fromkeys(written)))
    if not anchors and words:
        overlap = [len(set(words) & s.stems) for s in sentences]
        if max(overlap, default=0) > 0:
            anchors = {n for n, v in enumerate(overlap) if v == max(overlap)}
    missing += _entities_unstated(claim, chunk, sentences, heading, anchors, set(missing))
    if missing:
        # every number it gives the chunk holds, some tied to other words ("the build plate at
        # 70-90 °C when printing" of "prints at 240-270 °C with the bed at 70-90 °C"): not
        # stated, but the chunk's sentence holds what it answers (`Claim.stated_as`)
        # So too a claim that names no thing ("The build plate should be at least 95-110 °C"):
        # it stands for no thing, but its numbers are the chunk's, which the chunk's thing
        # answers with where the question asks for it (`agreement.reduce`).
        named = claim.named(in_passing=False)
        other = [m for m in missing if m not in apart and not m.startswith("words: ")
                 and (named or not m.startswith(_NO_THING))]  # fmt: skip
        held_answer = (bool(apart) or (numbers_hold and not named)) and not other
        return _Finding("no", tuple(dict.fromkeys(missing)), share=share,
                        stating=stating if held_answer else "")  # fmt: skip
    if novel:  # only entailment (the judge's model) may read other words as the chunk's
        why = f"its numbers are the chunk's, not its words ({', '.join(novel[:6])})"
        return _Finding("unsure", why=why, share=share, stating=stating)
    if _negation_differs(claim, sentences):
        return _Finding("unsure", why="negation differs from the chunk's", share=share)
    return _Finding("yes", share=share)


_PREFIXED = re.compile(r"\b(un|non-?)([a-z]{5,})\b", re.IGNORECASE)
"""A word negated by its prefix (`unweldable`, `non-toxic`)."""


def _unprefixed(text: str, other: str) -> str:
    """`text` with `unX` written `not X` where the `other` text says X (as a word or stem)."""
    said = {w.lower() for w in re.findall(r"[A-Za-z]+", other)}
    stems = {stem(w) for w in said}

    def sub(m: re.Match[str]) -> str:
        word = m.group(2).lower()
        return f"not {m.group(2)}" if word in said or stem(word) in stems else m.group(0)

    return _PREFIXED.sub(sub, text)


def _statement_stems(read: _Read) -> set[str]:
    """The content words of `read` after its label, if it has one."""
    label = _label_end(read.text)
    return {w for w, start, _ in read.words if start >= label}


def _quantities_stated(
    claim: _Read, sentences: Sequence[_Read]
) -> tuple[set[int], list[str], set[int], list[str]]:
    """The sentences that state the claim's quantities, and the quantities none states.

    A quantity is stated by a sentence that holds it and does not tie a word the claim ties to
    it only to another quantity of its kind (`the bed at 70-85 °C` does not state a bed at
    230-250 °C, though the sentence holds 230-250 °C for the nozzle). Also returned: of those
    none states, the sentences that hold one by value, and which they are.
    """
    ties = [t for s in sentences for t in _ties(s)]
    claim_ties = _ties(claim)
    anchors: set[int] = set()
    held: set[int] = set()
    missing: list[str] = []
    apart: list[str] = []
    for q in claim.quantities:
        near = {w for w, t in claim_ties if t == q}
        found = False
        holding: set[int] = set()
        for n, sentence in enumerate(sentences):
            for given in sentence.quantities:
                if not _states(given, q, claim):
                    continue
                holding.add(n)
                kind = [(word, t) for word, t in ties if t.unit == given.unit]
                elsewhere = any(
                    any(w == word and not _states(t, q, claim) for word, t in kind)
                    and not any(w == word and _states(t, q, claim) for word, t in kind)
                    for w in near
                )
                if not elsewhere:
                    anchors.add(n)
                    found = True
        if not found:
            missing.append(claim.text[q.start : q.end])
            if holding:
                held |= holding
                apart.append(claim.text[q.start : q.end])
    return anchors, missing, held, apart


def _states(given: Quantity, q: Quantity, claim: _Read) -> bool:
    """Whether a chunk's quantity `given` states the claim's `q` (of `claim`).

    As `same_quantity`, and a figure rounded as written (`about 2.2 g/cm3` of 2.17, converted
    or not); a range's width is stated only beside the range itself (`190-220 °C, a 30 °C
    window`), never as a point value of its own (`prints at 30 °C`).
    """
    if not same_quantity(q, given):
        return _rounds_to(given, q, claim.text[q.start : q.end])
    width = (
        q.low == q.high
        and given.high > given.low
        and (not q.unit or q.unit == given.unit)
        and not given.low - 1e-9 <= q.low <= given.high + 1e-9
    )
    if not width:
        return True
    return any(o is not q and o.high > o.low and same_quantity(o, given) for o in claim.quantities)


_WRITTEN_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)|\d+(?:\.\d+)?")


def _rounds_to(given: Quantity, q: Quantity, written: str) -> bool:
    """Whether `given`, in the claim's unit, rounds to `q` as the claim writes it (2 digits+)."""
    if q.unit and not given.unit:
        return False
    numbers = _WRITTEN_NUMBER.findall(written)[: 1 if q.low == q.high else 2]
    ends = [(given.low, q.low, numbers[0])] if numbers else []
    if q.low != q.high and len(numbers) == 2:
        ends = [(given.low, q.low, numbers[0]), (given.high, q.high, numbers[1])]
    elif given.low != given.high:
        return False  # a point is stated by a range only within it (`same_quantity`)
    if not ends:
        return False
    for stated, claimed, number in ends:
        value = stated
        if q.unit and given.unit != q.unit:
            converted = convert(stated, given.unit, q.unit)
            if converted is None:
                return False
            value = converted
        digits = number.replace(",", "").replace(".", "").strip("0")
        if len(digits) < 2:
            return False  # "about 2" of 2.17 says too little to hold
        places = len(number.partition(".")[2])
        step = 10.0**-places if places else 10.0 ** (len(number) - len(number.rstrip("0")))
        rounded = math.floor(abs(value) / step + 0.5 + 1e-9) * step  # half up, as people round
        if not math.isclose(rounded, abs(claimed), rel_tol=1e-9, abs_tol=1e-9):
            return False
    return True


def _same_thing(key: str, keys: Iterable[str]) -> bool:
    """Whether the entity `key` is one of `keys` (a name two things share is either)."""
    mine = _alternatives(key)
    return any(mine & _alternatives(k) for k in keys)


def _entities_unstated(
    claim: _Read,
    chunk: Shown,
    sentences: Sequence[_Read],
    heading: _Read,
    anchors: set[int],
    missing: set[str],
) -> list[str]:
    """The claim's entities the chunk does not state, or states of something else.

    Every entity the claim is about must be stated, and be what its supporting sentences are
    about, or, where they name nothing, the chunk's subject (its heading). One it names in
    passing ("unlike PLA", "similar to ABS") must be named by the chunk too.
    """
    stated = heading.named().union(*(s.named() for s in sentences))
    required = claim.named(in_passing=False)
    unstated = [k for k in sorted(claim.named()) if not _same_thing(k, stated)]
    out = [
        claim.said(k) if k in required else f"{claim.said(k)} (the chunk does not name it)"
        for k in unstated
    ]
    if not claim.words and not claim.quantities:  # it only names things: "Use ABS or ASA."
        return out
    parts = chunk.heading.split(">")
    subject = (
        heading_part(parts[-1], heading)
        or heading_part(parts[0], heading)
        or (sentences[0].named(in_passing=False) if sentences else set())
    )
    about = {
        k: sentences[n].said(k)
        for n in sorted(anchors)
        for k in sentences[n].named(in_passing=False)
    }
    for key in sorted(required - set(unstated) - missing):
        if about and not _same_thing(key, about):
            others = ", ".join(sorted(set(about.values()), key=str.lower))
            out.append(f"{claim.said(key)} (the chunk says it of {others})")
        elif not about and not _same_thing(key, subject):
            out.append(f"{claim.said(key)} (the chunk names it only in passing)")
    return out


def _negation_differs(claim: _Read, sentences: Sequence[_Read]) -> bool:
    """Whether a word of the claim is negated where the chunk's never is, or the other way round.

    A word is negated where a negation comes before it in its clause ("they are not dishwasher
    safe": `dishwasher`, `safe`; "Outdoor durability of balsa: not durable": `durable`). A
    label's clauses (`Outdoor durability of balsa:`) state nothing and are left out on both
    sides; a word the chunk states nowhere outside its labels says nothing either way.
    """
    theirs: dict[str, set[bool]] = {}
    for sentence in sentences:
        for word, negated in _polarities(sentence):
            theirs.setdefault(word, set()).add(negated)
    return any(
        word in theirs and negated not in theirs[word] for word, negated in _polarities(claim)
    )


def _polarities(read: _Read) -> list[tuple[str, bool]]:
    """Each content word of `read` outside its label, and whether it is negated in its clause."""
    label = _label_end(read.text)
    out = []
    for word, start, _ in read.words:
        if start < label:
            continue
        a, _ = _clause_of(read.text, start)
        out.append((word, _negated(read.text[max(a, label) : start])))
    return out


def heading_part(part: str, heading: _Read) -> set[str]:
    """The entities `heading` names within its `part` (a segment of the heading path)."""
    at = heading.text.find(part.strip())
    if at < 0:
        return set()
    end = at + len(part.strip())
    return {k for k, a, _, _ in heading.entities if at <= a < end}


# -- an answer -------------------------------------------------------------------------------


def _retagged(sentence: str, ids: Sequence[str]) -> str:
    body = _untagged(sentence).rstrip()
    end = re.search(r"[.!?]$", body)
    tags = " ".join(tag(i) for i in ids)
    return f"{body[:-1].rstrip()} {tags}{end.group(0)}" if end else f"{body} {tags}"


def check_claims(
    answer: str,
    shown: Mapping[str, Shown],
    entail: Entail | None = None,
    names: Iterable[str] = (),
    similar: Similar | None = None,
    vocabulary: Vocabulary | None = None,
) -> list[Claim]:
    """The claims of `answer`, each checked against the chunks `shown` (see the module doc).

    Args:
        answer: The answer (its tags resolve only to `shown` chunks).
        shown: The chunks the model was shown, as it was shown them.
        entail: The judge's model asked whether a passage supports a claim; None settles what
            numbers and names cannot as unsupported.
        names: Headings of more chunks (the KB's, retrieval's candidates): the entities they
            are about are entities in a claim too, though no shown chunk is about them.
        similar: The KB's embedding model: of several chunks that state a claim, it is
            retagged to the one nearest in meaning and words; None: nearest in words.
        vocabulary: The KB's names: the things a claim and a chunk name are its things, by
            any name it knows; None: the things the headings (`names` too) are about.
    """
    vocab = _vocabulary([*(c.heading for c in shown.values()), *names], vocabulary)
    pending = _findings(answer, shown, vocab)
    unsure = [(s, i) for s, _, found in pending for i, f in found.items() if f.verdict == "unsure"]
    settled: dict[tuple[str, str], bool] = {}
    if unsure and entail is not None:
        scores = entail([(plain(s), shown[i].whole) for s, i in unsure])
        settled = {pair: score > 0 for pair, score in zip(unsure, scores, strict=True)}
    ids = list(shown)
    near: dict[str, dict[str, float]] = {}
    if similar is not None and pending:
        rows = similar([plain(s) for s, _, _ in pending], [shown[i].whole for i in ids])
        near = {
            s: dict(zip(ids, r, strict=True)) for (s, _, _), r in zip(pending, rows, strict=True)
        }
    return [
        _verdict(sentence, cited, found, settled, near.get(sentence, {}), entail is not None)
        for sentence, cited, found in pending
    ]


_Pending = tuple[str, tuple[str, ...], dict[str, _Finding]]


def _findings(answer: str, shown: Mapping[str, Shown], vocab: _Vocabulary) -> list[_Pending]:
    """Each claim of `answer` with what it cites and what every shown chunk says of it."""
    chunks = {
        i: (
            [_read(s, vocab) for s in re.split(r"(?<=[.!?;])\s+", plain(c.text)) if s.strip()]
            or [_read(c.text, vocab)],
            _read(c.heading, vocab),
        )
        for i, c in shown.items()
    }
    pending = []
    for sentence in _sentences(answer):
        cited = tuple(split_citations(sentence, list(shown))[0])
        # a decision is checked as any claim (the memory pins it): its label says nothing
        read = _read(_DECISION.sub("", sentence, count=1), vocab)
        if cited or read.quantities or read.entities or _DECISION.match(sentence):
            pending.append(
                (sentence, cited, {i: _judge(read, shown[i], *chunks[i], vocab) for i in shown})
            )
    return pending


def _verdict(
    sentence: str,
    cited: tuple[str, ...],
    found: Mapping[str, _Finding],
    settled: Mapping[tuple[str, str], bool],
    closeness: Mapping[str, float],
    entailed: bool,
) -> Claim:
    """One claim's status from what the chunks say of it (`settled`: by entailment)."""

    def holds(i: str) -> bool:
        return found[i].verdict == "yes" or settled.get((sentence, i), False)

    if cited and any(holds(i) for i in cited):
        return Claim(sentence, cited, "supported", _says(cited, found, holds))
    supporting = sorted(
        (i for i in found if holds(i) and found[i].share >= _RETAG_WORD_SHARE),
        key=lambda i: -(found[i].share + closeness.get(i, 0.0)),
    )
    if supporting:
        new = supporting[0]
        was = f"cited {', '.join(cited)}, which does not state it" if cited else "was uncited"
        return Claim(
            _retagged(sentence, [new]),
            (new,),
            "retagged",
            f"{was}; {new} states it",
            _missing(cited, found),
            written=sentence,
        )
    if cited or quantities(plain(sentence)) or _DECISION.match(sentence):
        why = _missing(cited, found) if cited else ("no shown chunk states it",)
        unsure = {found[i].why for i in cited if found[i].verdict == "unsure"}
        reason = "; ".join([*why, *sorted(unsure)]) or "no shown chunk supports it"
        if unsure and not entailed:
            reason += " (no entailment check: kept out)"
        stated_as = tuple(
            (i, f.stating) for i in cited or found
            if (f := found[i]).stating and (f.verdict == "no" or not entailed)
        )  # fmt: skip
        return Claim(sentence, cited, "dropped", reason, tuple(why), stated_as=stated_as)
    return Claim(sentence, (), "uncited", "names an entity; no chunk cited")


def _says(
    cited: Sequence[str], findings: Mapping[str, _Finding], holds: Callable[[str], bool]
) -> str:
    ids = [i for i in cited if holds(i)]
    how = "by entailment" if any(findings[i].verdict == "unsure" for i in ids) else ""
    return f"{', '.join(ids)} states it" + (f" ({how})" if how else "")


def _missing(cited: Sequence[str], findings: Mapping[str, _Finding]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m for i in cited for m in findings[i].missing))


def answer_entities(
    sentence: str,
    shown: Mapping[str, Shown],
    names: Iterable[str] = (),
    vocabulary: Vocabulary | None = None,
) -> dict[str, str]:
    """The entities `sentence` names, not in passing: what it answers (key: as written)."""
    read = _read(sentence, _vocabulary([*(c.heading for c in shown.values()), *names], vocabulary))
    return {k: read.text[a:b] for k, a, b, passing in read.entities if not passing}


def revise(answer: str, claims: Sequence[Claim]) -> str:
    """`answer` with retagged claims retagged and dropped claims left out."""
    text = answer
    for claim in claims:
        if claim.status == "retagged" and claim.written:
            text = text.replace(claim.written, claim.text, 1)
        elif claim.status == "dropped":
            text = text.replace(claim.text, "", 1)
    lines = [re.sub(r"[ \t]{2,}", " ", line).rstrip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line.strip(" -*•"))


def support_share(claims: Sequence[Claim]) -> float | None:
    """The share of the claims that stand (all but dropped) that their chunks support.

    Uncited claims count, as not supported; None when no claim stands.
    """
    standing = [c for c in claims if c.status != "dropped"]
    return sum(c.supported for c in standing) / len(standing) if standing else None


def mark_fixed(claims: Sequence[Claim], before: Sequence[Claim]) -> list[Claim]:
    """`claims` of a fixed answer, those that replace a failed claim of `before` as `fixed`."""
    failed = [c for c in before if not c.supported]
    if not failed:
        return list(claims)
    return [
        replace(c, status="fixed", reason=f"rewritten after the check; {c.reason}")
        if c.status == "supported" and all(c.text != b.text for b in before)
        else c
        for c in claims
    ]
