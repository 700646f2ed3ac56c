"""The verdict in the KB's own words: the direct answer, then sentences of the chunks, tagged.

Model-written text is the direct answer only (its first line or two, checked). The supporting
lines are sentences of the chunks as the judge was shown them, quoted with their tags, so a
line cannot misstate its chunk. They are chosen for bearing on the question: the relevance
retrieval already scored (lexical, dense, the reranker: `Chunk.score`), the chunks the standing
answer's supported claims cite, and the chunks that hold a figure of the property asked. The
chunk retrieval ranked first by a wide margin is never passed over for a neighbour, and on a
question about one thing it leads a direct answer that cites another chunk (`ordered`). A line
reads as a sentence: never the prompt's heading path ("white oak > Typical uses: ...") nor a
tag the memory neutralised (`[KB-ref ...]`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from collective.kb.chunking import HEADING_SEPARATOR
from collective.kb.citations import tag
from collective.kb.vocabulary import Vocabulary
from collective.kb.words import STOPWORDS, content_words
from collective.verdict.agreement import Asked, unnamed
from collective.verdict.support import Shown, plain

__all__ = [
    "WIDE_MARGIN",
    "direct_answer",
    "first_of_thing",
    "ordered",
    "readable",
    "said_once",
    "supporting_lines",
    "unlabelled",
    "wanted_lines",
]

WIDE_MARGIN = 0.1
"""How far ahead of the next the first chunk's retrieval score must be to be kept in any case.
Measured on the bundled eval KB (bench/README.md): of the 65 bundled questions about one thing,
the first chunk was a gold one in all 43 where it led by 0.1 or more (the two it was not led by
nothing); passed over by the judge were 0.88 against 0.57, 0.87 against 0.35, 0.93 against 0.79
("Do I really have to dry polypropylene?") and 0.95 against 0.77 ("Can I paint over silicone
sealant?"); on the demo KB, "Parts in a hot car" 0.70 against 0.46."""
RELEVANT_SHARE = 0.6
"""Of the first chunk's retrieval score, the share a chunk no answer cites must reach to be
quoted (on the demo KB, "Heat creep" at 0.41 of 0.70 is about hotends, not the hot car asked)."""
CITED_BONUS = 0.2
"""How much a chunk the standing answer cites, or one with a figure asked, ranks above its
retrieval score: a tie-break among the relevant, not a pass for the irrelevant."""

_MIN_SHARED = 2
"""Of a line no answer cites and that states no figure asked, the question's telling words (those
at most half the chunks shown use) it must share: one is a thing's name as often as an answer.
The chunk retrieval ranks first needs one that names no thing ("dry" of "Do I have to dry
polypropylene?", where most chunks shown are polypropylene's)."""
_MIN_SAID = 3
"""Content words a direct answer must have to be said by a line that holds them all."""
_LEADING_PRONOUN = re.compile(r"(?:It|They|This|These|That|Those|Its|Their)\b")
"""A sentence that opens on a pronoun reads only after the one before it."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\[])")
_HEADING_PATH = re.compile(rf"^[^:\n\[]{{1,80}}{re.escape(HEADING_SEPARATOR)}[^:\n\[]{{1,80}}:\s*")
_KB_REF = re.compile(r"\s*\[KB-ref\b[^\]]*\]", re.IGNORECASE)
_BULLET = re.compile(r"^\s*[-*•]\s*")
_FIGURE = re.compile(r"(?<![\w.-])\d[\d.,]*(?:\s?[-–]\s?\d[\d.,]*)?(?!\w|-[^\W\d_])")
"""A number or a range as written ("50", "2.5-3.2"), not the digits of a name ("5052-H32",
"PA12", "TPU 95A")."""


def readable(line: str) -> str:
    """`line` as a reader reads it: no heading path before it, no neutralised tag in it."""
    body = _BULLET.sub("", line)
    bullet = line[: len(line) - len(body)]
    body = _KB_REF.sub("", _HEADING_PATH.sub("", body)).lstrip()
    return f"{bullet}{body}".rstrip()


def direct_answer(text: str, most: int = 2) -> str:
    """The first `most` sentences of an answer's first line: what the model answers."""
    first = next((readable(x) for x in text.splitlines() if x.strip(" -*•")), "")
    pieces = [p for p in _SENTENCE_END.split(first.strip(" -*•")) if p.strip()]
    return " ".join(pieces[:most])


_LABEL = re.compile(r"^[\W_]*(?P<label>[^\W\d_][^:\n\[]{0,40}?)[\W_]*:[*_]*\s+")


def unlabelled(line: str, headings: Iterable[str]) -> str:
    """`line` without a label the model copied from a chunk's section heading before it.

    "notes: TPU 95A: print slowly ..." under "TPU 95A > Notes", "Temperature**: 70-80 °C" under
    "ASA > Temperature": a section's name is the prompt's, not the answer's. A label that is no
    section's name ("Drying ASA:", "ABS:") is the line's own.
    """
    m = _LABEL.match(line)
    if m is None:
        return line
    sections = {
        " ".join(part.lower().split())
        for heading in headings
        for part in heading.split(HEADING_SEPARATOR)[1:]
    }
    return line[m.end() :] if " ".join(m["label"].lower().split()) in sections else line


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def supporting_lines(
    asked: Asked,
    shown: Mapping[str, Shown],
    scores: Mapping[str, float],
    cited: Sequence[str] = (),
    vocabulary: Vocabulary | None = None,
    said: str = "",
    most: int = 3,
    agreed: str | None = None,
) -> list[str]:
    """The chunks' own sentences that bear on the question, best first, each with its tag.

    Args:
        asked: The question, read.
        shown: The chunks as the judge was shown them.
        scores: Each chunk's retrieval score (higher is more relevant).
        cited: The chunks the standing answer's supported claims cite.
        vocabulary: The KB's names and figures (the question's property, each chunk's thing).
        said: What the verdict already says, its direct answer: a sentence it holds is not
            quoted again, and of a question that names things, a line about another thing is
            quoted only where the answer cites it and names that thing.
        most: The most lines.
        agreed: The chunk more answers lead with than the standing one (`agreed_lead`): first
            where retrieval ranks none first by a wide margin.
    """
    figures = (
        {f.chunk_id: f for f in vocabulary.figures(asked.property)}
        if vocabulary is not None and asked.property
        else {}
    )
    ids = _on_the_things(asked, list(shown), cited, vocabulary, said)
    if not ids:
        return []
    order, top, first = _in_order(ids, scores, {*cited}, figures, agreed)
    question = set(content_words(asked.question))
    # a word most chunks shown use ("filament" in a KB of filaments) tells none of them apart
    words = {i: set(content_words(f"{shown[i].heading} {shown[i].text}")) for i in shown}
    telling = {w for w in question if sum(w in ws for ws in words.values()) <= len(shown) / 2}
    # one shared word may be a thing's name; a word of what is asked tells the first chunk apart
    names = {w for i in shown if vocabulary is not None and (t := vocabulary.thing_of(i))
             for w in t.words}  # fmt: skip
    already = plain(said).lower()
    # once the verdict speaks of what is asked (a word of the question that names no thing, or
    # the figure asked where the chunks shown hold it), a line of a thing asked about that
    # speaks of none of it is about the thing, not the question
    asks = question - names if asked.things else set()
    held = bool(asks) and any(f.thing in asked.things for f in figures.values())
    anchored = held or bool(asks & set(content_words(plain(said))))
    out: list[str] = []
    for i in order:
        # its best sentence the verdict does not say yet (a figure: not its figures either)
        sentence = next((s for s in _best_sentences(shown[i], question, figures.get(i))
                         if plain(s).lower().rstrip(".") not in already
                         and not _said_already(s, said, vocabulary)), "")  # fmt: skip
        if not sentence:
            continue
        bears = i in cited or i in figures or i == first
        relevant = scores.get(i, 0.0) >= RELEVANT_SHARE * scores.get(top, 0.0)
        shared = telling & set(content_words(sentence))
        shares = len(shared) >= _MIN_SHARED or (i == top and bool(shared - names))
        if not bears and not (relevant and shares):
            continue  # retrieved beside the others, but says nothing the question asks
        speaks = i in figures or _speaks(shown[i], sentence, asks)
        if anchored and not speaks and _of(i, asked, vocabulary) and i != first:
            # "Heat resistance of PVA" under "What happens to PVA filament in water?", a
            # tensile strength under the density asked
            continue
        anchored = anchored or speaks
        out.append(f"{_named(sentence, shown[i], vocabulary)} {tag(i)}")
        if len(out) >= most:
            break
    return out


def _in_order(
    ids: list[str],
    scores: Mapping[str, float],
    cited: set[str],
    figures: Mapping[str, object],
    agreed: str | None = None,
) -> tuple[list[str], str, str | None]:
    """The chunks `ids` best first, retrieval's first, and the one that comes first in any case.

    A chunk the answer cites or with a figure asked ranks above its retrieval score
    (`CITED_BONUS`); the one first by a wide margin (`WIDE_MARGIN`), else the one the answers
    agree on (`agreed`), comes first in any case.
    """
    first = _clear_first(ids, scores) or (agreed if agreed in ids else None)
    order = sorted(
        ids, key=lambda i: -scores.get(i, 0.0) - CITED_BONUS * ((i in cited) + (i in figures))
    )
    if first is not None:
        order.remove(first)
        order.insert(0, first)
    return order, max(ids, key=lambda i: scores.get(i, 0.0)), first


def _clear_first(ids: Sequence[str], scores: Mapping[str, float]) -> str | None:
    """Retrieval's first of `ids` where it leads the next by `WIDE_MARGIN` or more (or is alone)."""
    ranked = sorted(ids, key=lambda i: -scores.get(i, 0.0))
    lead = scores.get(ranked[0], 0.0) - scores.get(ranked[1], 0.0) if len(ranked) > 1 else 1.0
    return ranked[0] if lead >= WIDE_MARGIN else None


def first_of_thing(
    asked: Asked, shown: Mapping[str, Shown], scores: Mapping[str, float], vocabulary: Vocabulary
) -> str | None:
    """Of a question about one thing, retrieval's first chunk shown, if first by a wide margin.

    Only where it is that thing's (`WIDE_MARGIN`): where no answer answers, it does in its own
    words ("Why won't glue stick to my teak?": "oily surface resists glue", 0.92 against 0.65,
    where the judge wrote of glues).
    """
    if len(asked.things) != 1 or len(shown) < 2:
        return None
    top = _clear_first(list(shown), scores)
    return top if top is not None and _of(top, asked, vocabulary) else None


def _speaks(chunk: Shown, sentence: str, asks: set[str]) -> bool:
    """Whether `sentence` of `chunk`, or its section's name ("Uses"), holds a word of `asks`."""
    sections = " ".join(chunk.heading.split(HEADING_SEPARATOR)[1:])
    return bool(asks & set(content_words(f"{sections} {sentence}")))


def _of(i: str, asked: Asked, vocabulary: Vocabulary | None) -> bool:
    """Whether chunk `i` is about a thing the question asks about."""
    thing = vocabulary.thing_of(i) if vocabulary is not None else None
    return thing is not None and thing.key in asked.things


def _on_the_things(
    asked: Asked, ids: list[str], cited: Sequence[str], vocabulary: Vocabulary | None, said: str
) -> list[str]:
    """Of chunks `ids`, those on the things the question names, if it names any.

    Another thing's chunk only where the answer cites it and its direct answer (`said`) names
    that thing (its alternative: "use marine plywood"); of a figure asked of one thing, never.
    """
    if not asked.things or vocabulary is None:
        return ids
    about = {i: t.key for i in ids if (t := vocabulary.thing_of(i)) is not None}
    one = len(asked.things) == 1 and asked.property is not None
    named = {n.thing.key for n in vocabulary.named_in(said)} if said and not one else set()
    return [
        i
        for i in ids
        if about.get(i) in asked.things or i not in about or (i in cited and about[i] in named)
    ]


def wanted_lines(
    asked: Asked,
    shown: Mapping[str, Shown],
    vocabulary: Vocabulary,
    words: Iterable[str],
    most: int = 2,
) -> tuple[bool, list[str]]:
    """The sentences of the asked thing's chunks that speak of the property asked in words.

    For a question whose property the KB holds no figure of for its thing (`Asked.wanted`):
    each sentence of a chunk shown about the thing asked that shares one of `words` (the
    property's telling words, `Asked.unspoken`), its own or its heading's, most shared first,
    tagged. Returns whether the first holds every one of them (the KB states it in words) and
    the lines.
    """
    words = set(words)
    found: list[tuple[int, str]] = []
    for i, chunk in shown.items():
        thing = vocabulary.thing_of(i)
        if thing is None or thing.key not in asked.things:
            continue
        heading = set(content_words(chunk.heading))  # "Uses" speaks for its sentences
        for sentence in _sentences(readable(chunk.text)):
            if shared := len(words & (set(content_words(sentence)) | heading)):
                found.append((shared, f"{_named(sentence.rstrip(), chunk, vocabulary)} {tag(i)}"))
    found.sort(key=lambda x: -x[0])  # stable: the chunks' order among equals
    return bool(found) and found[0][0] == len(words), [line for _, line in found[:most]]


def ordered(
    asked: Asked,
    direct: str,
    quoted: Sequence[str],
    scores: Mapping[str, float],
    vocabulary: Vocabulary | None = None,
    agreed: str | None = None,
) -> list[str]:
    """The verdict's lines in order: the direct answer, then the quoted lines, best first.

    Of a question about one thing, where retrieval ranked the first quoted line's chunk above
    every chunk the direct answer cites by a wide margin (`WIDE_MARGIN`), that line leads and
    the direct answer follows it: the judge answered about the thing asked, but another chunk of
    it is what the question asks ("Is birch plywood fine to leave outside?": its outdoor
    durability, over the workability line the judge copied). A direct answer that cites a chunk
    with a figure of the property asked answers it, and leads; one that cites none follows a
    first line whose chunk has one, however ranked ("the bed temperature of the filament used
    for ABS supports": HIPS's print settings, over the judge's line on what HIPS is used for).
    So does the line of the chunk more answers lead with than the direct answer (`agreed`).
    An uncited direct answer is not compared, and a choice between things is the answers' to
    make, not retrieval's.
    """
    if not direct:
        return list(quoted)
    lines = [direct, *quoted]
    cites = {i for i in scores if tag(i) in direct}
    first = {i for i in scores if quoted and tag(i) in quoted[0]}
    if len(asked.things) != 1 or not cites or not first or first & cites:
        return lines
    figures = {f.chunk_id for f in vocabulary.figures(asked.property, asked.things)} if (
        vocabulary is not None and asked.property) else set()  # fmt: skip
    if cites & figures:
        return lines
    ahead = min(scores[i] for i in first) - max(scores.get(i, 0.0) for i in cites)
    # or it states the figure asked, or more answers lead with it
    leads = ahead >= WIDE_MARGIN or bool(first & figures) or agreed in first
    return [quoted[0], direct, *quoted[1:]] if leads else lines


def said_once(
    direct: str, quoted: Sequence[str], vocabulary: Vocabulary | None = None
) -> tuple[str, list[str]]:
    """The direct answer and the quoted lines, the direct answer left out where lines hold it.

    A direct answer every word of which a quoted sentence holds ("C932 bearing bronze has a
    density of about 8.90 g/cm3" of "... 8.90 g/cm3 and melts over 855-980 °C") would be said
    twice: the sentence, in the chunk's words, leads instead. So is a short one that states a
    figure ("At 50 °C" of "Drying TPE 85A: dry at 50 °C for 4 hours"), or that a line holds word
    for word after its opening ("acetone dissolves it" of "... bonds skin instantly; acetone
    dissolves it"; "A bamboo board." is the answer, the subject a line opens with). A direct
    answer of several sentences is left out where each is held by a line, those lines first.
    A thing is the same by any name the KB knows ("Plexiglas is used for windows" of "Acrylic
    is used for windows").
    """
    whole = _holder(plain(direct), quoted, vocabulary)
    holders = (
        [whole] if whole else [_holder(s, quoted, vocabulary) for s in _sentences(plain(direct))]
    )
    if not holders or None in holders:
        return direct, list(quoted)
    first = list(dict.fromkeys(h for h in holders if h is not None))
    return "", [*first, *(q for q in quoted if q not in first)]


def _holder(
    sentence: str, quoted: Sequence[str], vocabulary: Vocabulary | None = None
) -> str | None:
    """The first of `quoted` that holds `sentence` (`said_once`), if any."""
    said, figures = set(content_words(sentence)), _FIGURE.findall(sentence)
    short = len(said) < _MIN_SAID and not figures
    if short and len(said) < 2:  # "ABS." is the answer, not a line naming it
        return None
    clause, words = _flat(sentence), _words_and_things(sentence, vocabulary)
    return next((q for q in quoted if _within(words, _words_and_things(plain(q), vocabulary))
                 and set(figures) <= set(_FIGURE.findall(plain(q)))
                 and (not short or _holds(_flat(q), clause))), None)  # fmt: skip


def _words_and_things(text: str, vocabulary: Vocabulary | None) -> tuple[set[str], set[str]]:
    """The content words of `text` but its things' names, and those things (by key)."""
    things = {n.thing.key for n in vocabulary.named_in(text)} if vocabulary is not None else set()
    return set(content_words(unnamed(text, vocabulary))), things


def _within(part: tuple[set[str], set[str]], whole: tuple[set[str], set[str]]) -> bool:
    return part[0] <= whole[0] and part[1] <= whole[1]


def _holds(line: str, clause: str) -> bool:
    """Whether `line` holds `clause` other than as its opening words."""
    return clause in line and not line.startswith(clause)


def _flat(text: str) -> str:
    """`text` without its tags, in lower case, its spaces single, its closing stop taken off."""
    return " ".join(plain(text).lower().split()).rstrip(" .;:!?")


def _said_already(sentence: str, said: str, vocabulary: Vocabulary | None = None) -> bool:
    """Whether every figure of `sentence` is in `said` (and it states one).

    A thing's name is no figure: "316" of "316 stainless steel" is said wherever its name is.
    """
    figures, said = _FIGURE.findall(unnamed(sentence, vocabulary)), unnamed(said, vocabulary)
    return bool(figures) and all(f in said for f in figures)


def _best_sentences(chunk: Shown, question: set[str], figure: object | None) -> list[str]:
    """The sentences of `chunk`, best first.

    The one that states the figure asked, then by how much each shares with the question (the
    chunk's order among equals).
    """
    sentences = _sentences(readable(chunk.text))
    text = getattr(figure, "text", "")
    states = [bool(text) and text.strip().rstrip(".") in s for s in sentences]
    shared = [len(question & set(content_words(s))) for s in sentences]
    order = sorted(range(len(sentences)), key=lambda n: (-states[n], -shared[n]))
    return [
        # "It needs ...": what "it" is, first
        f"{sentences[n - 1]} {sentences[n]}"
        if n > 0 and _LEADING_PRONOUN.match(sentences[n])
        else sentences[n].rstrip()
        for n in order
    ]


_ALIAS = re.compile(r"\([^)]*\)")


def _names_a_thing(title: str) -> bool:
    """Whether a document's title is a thing's name, not a topic's.

    A name is content words only ("PLA (polylactic acid)", "6061-T6 aluminium", "contact
    cement"); a topic's title is a phrase with function words ("Choosing a material").
    """
    words = re.findall(r"[^\W_]+", _ALIAS.sub(" ", title).lower())
    return bool(words) and not any(w in STOPWORDS for w in words)


def _opens_with_thing(sentence: str, section: str, vocabulary: Vocabulary | None) -> bool:
    """Whether `sentence` opens with `section`'s name (its alias left out), a thing's name.

    Not a property's: "Drying", "Heat", "Print temperatures" name what a KB's figures measure.
    """
    name = _ALIAS.sub(" ", section).strip()
    if not name or not re.match(rf"{re.escape(name)}(?!\w)", sentence.strip(), re.IGNORECASE):
        return False
    measured = {
        w for p in (vocabulary.properties() if vocabulary else ()) for w in content_words(p)
    }
    return _names_a_thing(name) and not set(content_words(name)) & measured


def _named(sentence: str, chunk: Shown, vocabulary: Vocabulary | None) -> str:
    """`sentence`, its subject named first where it names none (a bare "dry at 45-50 °C").

    Only a thing's name is put first: a topic's title ("Choosing a material") is no sentence's
    subject. A sentence that opens with its section's name, where that names no property
    ("Polycarbonate is strong" under "Engineering filaments > Polycarbonate (PC)", not "Drying
    takes 4 hours" under "ABS > Drying"), names the thing it is about.
    """
    title, *sections = (p.strip() for p in chunk.heading.split(HEADING_SEPARATOR))
    if sections and _opens_with_thing(sentence, sections[-1], vocabulary):
        return sentence
    names: tuple[str, ...] = (title,)
    if vocabulary is not None and (thing := vocabulary.thing_of(chunk.id)) is not None:
        title, names = thing.title, (thing.title, *thing.names)
        if vocabulary.named_in(sentence):
            return sentence
    low = sentence.lower()
    if not _names_a_thing(title) or any(n.lower() in low for n in names if n):
        return sentence
    if set(content_words(title)) & set(content_words(sentence)):
        return sentence  # "ABS is tough" under "ABS and ASA": it names its subject
    return f"{title}: {sentence}"
