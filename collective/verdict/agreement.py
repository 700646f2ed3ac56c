"""The answer decided by agreement on what answers the question.

A small judge aggregates badly (SLM-MUX, arXiv 2510.05077; DeliberationBench, arXiv
2601.08835: picking one answer beat every deliberation protocol), and the answer most samples
give is right more often than any one of them (self-consistency; CISC, arXiv 2502.06233,
weights the vote by the model's confidence). So each answer (the judge's own, the samples', the
members') is checked against the chunks its prompt showed, then *reduced* to its answer to the
question: the thing its direct answer names, and the figure it states of the property the
question asks about (both read through the KB's `Vocabulary`). Among the reduced answers the KB
supports and that answer the question asked, the one most of them give (weighted by each
answer's confidence, where its backend reports one) stands. An even split says so and shows
both. A supported answer to another question (about a thing the question does not ask about,
or with a figure of another property where the KB holds one of the property asked) never wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from collective.kb.quantities import Quantity, quantities, same_quantity
from collective.kb.store import Chunk
from collective.kb.vocabulary import Figure, Named, Vocabulary
from collective.kb.words import STOPWORDS, content_words
from collective.verdict.comparison import property_asked
from collective.verdict.described import Described, described
from collective.verdict.support import (
    Claim,
    Entail,
    Shown,
    answer_entities,
    check_claims,
    plain,
    revise,
    shown_whole,
)

__all__ = [
    "NO_ANSWER",
    "OFF_QUESTION",
    "Asked",
    "Checked",
    "Decision",
    "Reduced",
    "agreed_lead",
    "check_answer",
    "decide",
    "not_held",
    "not_stated",
    "reduce",
    "reduced_answer",
    "unnamed",
]

NO_ANSWER = "The knowledge base does not answer this question: no chunk shown to the council \
supports the claims it made."
OFF_QUESTION = "The knowledge base does not answer this question: what it supports of the \
answers given is about something else."


def not_held(names: Sequence[str]) -> str:
    """The verdict where the question asks about things no chunk shown is about."""
    said = " or ".join(f'"{n}"' for n in names)
    return (
        f"The knowledge base does not answer this question: it holds nothing on {said}, so no "
        "figure or fact about it can be given from it."
    )


def not_stated(wanted: str, thing: str) -> str:
    """The verdict's lead where the KB states nothing of the property asked of a thing it holds."""
    return (
        f"The knowledge base does not answer this question: it does not state the {wanted} of "
        f"{thing}."
    )


@dataclass(frozen=True)
class Checked:
    """One answer after the claim check."""

    who: str
    text: str
    """The answer with its claims retagged or dropped as the check found."""
    claims: tuple[Claim, ...]
    answer: Mapping[str, str]
    """The entities its first sentence names (key: as written): what it answers."""
    confidence: float | None = None
    """The model's confidence in it (0-1, from its log-probabilities), where reported."""
    written: str = ""
    """The answer as the model wrote it (before the check)."""

    @property
    def supported(self) -> int:
        """How many of its claims a chunk supports."""
        return sum(c.supported for c in self.claims)

    @property
    def standing(self) -> int:
        """How many of its claims stand (all but the dropped)."""
        return sum(c.status != "dropped" for c in self.claims)


_ASKED_FIRST = re.compile(r"^\s*(?:[-*•]\s*)?[^\n.!?]{1,300}\?(?:\s*[-–:](?=\s))?\s*")
"""A question an answer opens with (the question asked, echoed): an answer's words follow it."""


def check_answer(
    who: str,
    text: str,
    shown: Mapping[str, Shown],
    entail: Entail | None = None,
    names: Iterable[str] = (),
    claims: Sequence[Claim] | None = None,
    vocabulary: Vocabulary | None = None,
    confidence: float | None = None,
) -> Checked:
    """`text` checked against the chunks `shown`, its claims retagged and dropped as found.

    Its `claims` are checked by `check_claims` unless given.
    """
    names = list(names)
    text = _ASKED_FIRST.sub("", text, count=1)
    if claims is None:
        claims = check_claims(text, shown, entail, names, vocabulary=vocabulary)
    revised = revise(text, claims)
    first = next((line for line in revised.splitlines() if line.strip(" -*•")), "")
    entities = answer_entities(first, shown, names, vocabulary)
    return Checked(who, revised, tuple(claims), entities, confidence, text)


# -- what the question asks ------------------------------------------------------------------

_NAME_LIKE = re.compile(r"(?<!^)(?<![.?!]\s)\b[A-Z][\w-]*|\b[A-Za-z]+\d[\w-]*|\b\d+[A-Za-z][\w-]*")
"""A word written as a name: capitalised inside a sentence, or letters and digits mixed."""


@dataclass(frozen=True)
class Asked:
    """What a question asks: the things it names, the property, and names the KB lacks."""

    question: str
    things: tuple[str, ...] = ()
    """The `Thing.key`s it names, in order."""
    property: str | None = None
    """The property it asks about (`Vocabulary.property_asked`)."""
    unknown: tuple[str, ...] = ()
    """What it asks about that no chunk shown and no name of the KB holds (`Inconel 718`)."""
    wanted: str = ""
    """The property it asks of its one thing where the KB holds no figure of it for that thing:
    the KB's property, named whole ("the drying temperature of polypropylene"), or the
    question's own words for one the KB reads none of ("thermal conductivity" in "the thermal
    conductivity of C110 copper")."""
    described: tuple[Described, ...] = ()
    """The things it names by what the KB says of them ("the wood used for baseball bats")."""

    @classmethod
    def read(
        cls, question: str, vocabulary: Vocabulary | None, shown: Iterable[Shown] = ()
    ) -> Asked:
        """The question read through the KB's vocabulary and the chunks shown for it.

        A thing the KB has no document for cannot be found by name, so it is read off what the
        question says that nothing shown holds: a word written as a name (capitalised inside
        the sentence, letters and digits mixed), or, where the question asks for a property of
        no thing the KB names, a word of its own no chunk shown uses ("the Janka hardness of
        hickory"). A thing it describes by its use is read off the chunks shown (`described`).
        """
        if vocabulary is None:
            return cls(question)
        shown = list(shown)
        prop = property_asked(question, vocabulary)
        hops = tuple(described(question, shown, vocabulary, prop))
        # a name inside a description describes ("ABS" of "the filament used for ABS supports")
        named = [n for n in vocabulary.named_in(question)
                 if not any(a <= n.start < b for a, b in (d.span for d in hops))]  # fmt: skip
        things = tuple(dict.fromkeys([*(d.thing for d in hops), *(n.thing.key for n in named)]))
        spans = [(n.start, n.start + len(n.written)) for n in named] + [d.span for d in hops]
        text = "\n".join(f"{c.source} {c.heading} {c.text}" for c in shown).lower()
        known = set(content_words(text)) | set(content_words(prop or ""))
        lacking: list[re.Match[str]] = []
        for m in _NAME_LIKE.finditer(question):
            if any(a <= m.start() < b for a, b in spans) or m.group(0).lower() in STOPWORDS:
                continue
            written = re.search(rf"(?<!\w){re.escape(m.group(0).lower())}(?!\w)", text)
            if not written and not set(content_words(m.group(0))) <= known:
                lacking.append(m)
        unknown: list[str] = []
        if lacking:  # a kind of thing: a word of the names the KB's things go by ("pan")
            kinds = {w for t in vocabulary.things() for w in t.words}
            kinds -= set(content_words(prop or ""))
            unknown = [m.group(0) for m in _asked_about(question, lacking, named, kinds)]
        if prop and not things and not unknown:  # "Janka hardness of hickory", "how hard is jatoba"
            rest = _without(question, spans)
            ends = [m[1] for m in _SUBJECT.finditer(rest) if m[1].lower() not in STOPWORDS]
            unknown = [w for w in ends if not set(content_words(w)) <= known]
        wanted = ""
        if prop and len(things) == 1 and not vocabulary.figures(prop, things):
            # only where the question uses its every word: "print speed" is read off "printing"
            wanted = prop if set(content_words(prop)) <= set(content_words(question)) else ""
        elif prop is None and len(things) == 1 and not unknown and named:  # no figure read of it
            start = min(n.start for n in named)
            said = _PROPERTY_OF.search(question[:start])
            wanted = said[1] if said and content_words(said[1]) else ""
        return cls(question, things, prop, tuple(dict.fromkeys(unknown)), wanted, hops)

    def unspoken(
        self, text: str, shown: Mapping[str, Shown], vocabulary: Vocabulary
    ) -> frozenset[str]:
        """The words of the property asked (`wanted`) that `text` should speak of and does not.

        Its words less those of the properties of the figures the chunks `text` cites state
        ("temperature" of a nozzle temperature tells nothing of a drying temperature; a "rated
        to 250 °C" of a property named "limits temperature" is a temperature); empty where the
        text or a heading of a chunk it cites holds one of them ("the best use of" is spoken of
        by a line of a "Uses" section).
        """
        if not self.wanted:
            return frozenset()
        cited = {i for i in shown if f"[KB#{i}]" in text}
        headings = " ".join(shown[i].heading for i in cited)
        said = set(content_words(f"{plain(text)} {headings}"))
        others: set[str] = set()
        for p in vocabulary.properties():
            if p != self.wanted and any(f.chunk_id in cited for f in vocabulary.figures(p)):
                others.update(content_words(p))
        telling = set(content_words(self.wanted)) - others
        return frozenset() if not telling or telling & said else frozenset(telling)


_LISTED = re.compile(
    r"[\s,;/&]*(?:(?:or|and|nor|vs|versus)\b\.?"
    r"|(?:[^\W\d_]+\s+){0,3}(?:than|like|unlike|against|compared\s+(?:to|with))\b)?"
    r"[\s,]*(?:(?:the|an?|my)\s+)?",
    re.IGNORECASE,
)
"""What may stand between two things a question lists or compares ("PLA or X", "than X")."""
_CHOICE = re.compile(r"\b(?:which|what)\s+([^\W\d_]+)", re.IGNORECASE)
"""A question that asks for a thing of a kind ("which filament", "what glue")."""


def _asked_about(
    question: str,
    lacking: list[re.Match[str]],
    named: list[Named],
    kinds: set[str],
) -> list[re.Match[str]]:
    """Of the names the KB lacks, those the question asks about rather than mentions in passing.

    Where the question names things the KB holds, or asks for a thing of a kind (`kinds`: words
    of the names its things go by: "which filament", not "what temperature"), a name it lacks
    is asked about only where it is listed or compared with one it asks about ("PLA or
    Inconel", "stronger than Tufnol", "hickory or ironwood"), or where it makes a common noun
    the KB knows into another thing ("a Le Creuset pot" is not the KB's enamel pot; "Bambu
    PLA" is PLA): "my Ender 3" or a label ("on t1:") is context. Otherwise
    every such name is what the question asks about.
    """
    spans = [(n.start, n.start + len(n.written)) for n in named]
    choice = any(set(content_words(m[1])) & kinds for m in _CHOICE.finditer(question))
    if not spans and not choice:
        return lacking
    lacks = [(m.start(), m.end()) for m in lacking]

    def gap(x: tuple[int, int], y: tuple[int, int]) -> str | None:
        (_, end), (start, _) = sorted((x, y))
        return question[end:start] if end <= start else None

    def listed(x: tuple[int, int], y: tuple[int, int]) -> bool:
        between = gap(x, y)
        return bool(between and between.strip() and _LISTED.fullmatch(between))

    def beside(x: tuple[int, int], y: tuple[int, int]) -> bool:
        """Listed or compared with `y`, or a word of one name with it ("Le Creuset")."""
        between = gap(x, y)
        return listed(x, y) or (between is not None and not between.strip() and y in lacks)

    common = [(a, b) for (a, b), n in zip(spans, named, strict=True) if not _proper(n)]
    asked = set(spans)
    asked |= {x for x in lacks if any(listed(x, y) for y in lacks if y != x)}  # "X or Y"
    asked |= {x for x in lacks if any(gap(x, y) == " " and x[1] <= y[0] for y in common)}
    grew = True
    while grew:  # "PLA, Zytel or Tufnol": beside one asked about, and so on
        grew = False
        for x in lacks:
            if x not in asked and any(beside(x, y) for y in asked):
                asked.add(x)
                grew = True
    return [m for m in lacking if (m.start(), m.end()) in asked]


def _proper(named: Named) -> bool:
    """Whether a thing is named by its title, an acronym or a code, not by a common noun."""
    written = named.written
    return (
        written.lower() == named.thing.title.lower()
        or any(c.isdigit() for c in written)
        or sum(c.isupper() for c in written) >= 2
    )


def _without(text: str, spans: Iterable[tuple[int, int]]) -> str:
    chars = list(text)
    for a, b in spans:
        chars[a:b] = " " * (b - a)
    return "".join(chars)


_PROPERTY_OF = re.compile(
    r"\bthe\s+((?:[^\W\d_][\w-]*\s+){0,3}?[^\W\d_][\w-]*)"
    r"\s+(?:of|for)\s+(?:the\s+|an?\s+|my\s+)?$",
    re.IGNORECASE,
)
"""A property named just before the thing it is asked of ("the coefficient of friction of ")."""
_SUBJECT = re.compile(r"\b(?:of|is|are|does|do)\s+(?:the\s+|an?\s+)?([A-Za-z][\w-]+)")
"""A word after "of", "is", "does" ("the density of hickory", "how hard is jatoba"): what a
question asks a property of."""


# -- each answer, reduced --------------------------------------------------------------------


@dataclass(frozen=True)
class Reduced:
    """One answer reduced to its answer to the question."""

    who: str
    things: frozenset[str]
    """The things its direct answer is about (`Thing.key`s)."""
    figure: Figure | None
    """The KB's figure of the property asked that a supported claim of it states."""
    on_question: bool
    why: str
    """Why it does not answer the question asked (empty when it does)."""
    weight: float = 1.0
    direct: bool = True
    """A claim of its direct answer (its first line) is supported: what it answers, the KB
    says. An answer whose supported claims are all reasons under an unsupported first line
    ("PLA should be used in a hot car" over "a PLA part left in a car will sag") gives no
    answer the KB supports."""
    choice: bool = False
    """The question does not name one thing to give a figure of: answers agree on the thing
    they name (the one chosen), not on a figure."""
    quote: tuple[tuple[str, str], ...] = ()
    """Where its direct answer's words are not its chunks' but its numbers of its thing are
    (`Claim.stated_as`): the chunks (id) and their sentences that state them, which the verdict
    quotes in its place."""

    @property
    def key(self) -> tuple[object, ...]:
        """What two answers must share to agree: the figure stated, else the things named."""
        if self.figure is not None and not self.choice:
            return ("figure", self.figure.thing, self.figure.low, self.figure.high)
        return ("things", self.things)


def _figure_stated(claim: Claim, figures: Sequence[Figure]) -> Figure | None:
    """The figure of `figures` that `claim` states from the chunk it cites."""
    stated = quantities(plain(claim.text))
    for figure in figures:
        if figure.chunk_id not in claim.cited:
            continue
        given = Quantity(figure.low, figure.high, figure.unit, 0, 0)
        if any(same_quantity(q, given) for q in stated):
            return figure
    return None


def _weight(answer: Checked) -> float:
    """An answer's vote: its model's confidence where reported, else one."""
    return 1.0 if answer.confidence is None else max(0.0, answer.confidence)


def _opening(answer: Checked) -> tuple[str, list[Claim]]:
    """An answer's first sentence as written, and the claims of it."""
    opening = plain(_first_sentence(answer.written or answer.text))
    return opening, [c for c in answer.claims if _in(c.written or c.text, opening)]


def reduce(answer: Checked, asked: Asked, vocabulary: Vocabulary | None) -> Reduced:
    """`answer` reduced to its answer to `asked`: the thing it names, the figure it states."""
    weight = _weight(answer)
    opening, said = _opening(answer)
    direct = [c for c in said if c.supported] if all(c.status != "dropped" for c in said) else []
    if vocabulary is None:
        return Reduced(answer.who, frozenset(answer.answer), None, True, "", weight, bool(direct))
    quote: tuple[tuple[str, str], ...] = ()
    figure_asked = len(asked.things) == 1  # of a choice, numbers are reasons, not the answer
    if figure_asked and said and not direct and all(c.supported or c.stated_as for c in said):
        # "turns liquid at 607-650 °C" of "melts over 607-650 °C": the answer the chunk states
        quote = tuple(dict.fromkeys(
            (i, sentence) for c in said for i, sentence in c.stated_as
            if getattr(vocabulary.thing_of(i), "key", None) in asked.things
        ))  # fmt: skip
        if quote:  # its own numbers, as its chunks state them
            ids = {i for i, _ in quote}
            own = [replace(c, cited=tuple(i for i, _ in c.stated_as if i in ids),
                           status="supported") for c in said if c.stated_as]  # fmt: skip
            direct = [*(c for c in said if c.supported), *own]
    keys = {k for key in answer.answer for k in key.split("|")}
    known = {t.key for t in vocabulary.things()}
    things = keys & known
    cited = {t.key for c in direct for i in c.cited if (t := vocabulary.thing_of(i))}
    if not things:  # "It prints at ...": what its direct answer's claims cite, it is about
        things = cited
    elif len(asked.things) == 1 and cited & things:
        # of one thing: a thing named in passing in a sentence of another's chunk is no answer
        # ("HIPS is used for supports for ABS" answers of HIPS, as "HIPS dissolves in ..." does)
        things &= cited | set(asked.things)
    figure = None
    if asked.property:
        every = vocabulary.figures(asked.property)
    elif figure_asked:  # a figure of one thing, of a property the KB does not read ("liquid")
        every = [f for p in vocabulary.properties() for f in vocabulary.figures(p, asked.things)]
    if asked.property or figure_asked:
        figure = next((f for c in direct if (f := _figure_stated(c, every))), None)
        if figure is not None:
            things = things | {figure.thing}
    why = ""
    if asked.unknown:
        why = f"the question asks about {', '.join(asked.unknown)}, which the KB holds nothing on"
    elif len(asked.things) == 1 and not things & set(asked.things):
        why = "it answers about another thing than the question names"
    elif figure is not None and asked.things and figure.thing not in asked.things:
        why = f"its {asked.property} figure is of another thing than the question names"
    choice = len(asked.things) != 1  # a figure question names its one thing
    return Reduced(answer.who, frozenset(things), figure, not why, why, weight, bool(direct),
                   choice, quote)  # fmt: skip


# -- the decision ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """Which answer stands, or the split, and why."""

    stands: Checked | None
    """The answer that stands (None where the answers split evenly)."""
    split: tuple[Checked, ...] = ()
    """The answers split evenly between, one per side, where they did."""
    why: str = ""
    votes: dict[str, list[str]] = field(default_factory=dict)
    """Per reduced answer (as a reader reads it), who gave it."""
    off_question: list[str] = field(default_factory=list)
    """Who gave a supported answer to another question, and why it did not count."""

    @property
    def text(self) -> str:
        """The verdict's text as decided (before its lines are chosen)."""
        if self.stands is not None:
            return self.stands.text
        sides = "\n".join(f"- {_first(a.text)}" for a in self.split)
        return f"The answers split evenly; each side as the knowledge base supports it:\n{sides}"


def _first(text: str) -> str:
    return next((line.strip(" -*•") for line in text.splitlines() if line.strip(" -*•")), "")


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\[])")


def _first_sentence(text: str) -> str:
    """The answer's first sentence as written (its tags after the full stop with it)."""
    pieces = _SENTENCE_END.split(_first(text))
    out = pieces[0] if pieces else ""
    for piece in pieces[1:]:
        if piece.startswith("["):
            out += f" {piece}"
        else:
            break
    return out


def _in(claim: str, opening: str) -> bool:
    """Whether a claim's sentence is (in) the answer's opening sentence, or holds it."""
    said = plain(claim).strip(" -*•")
    return bool(said) and (said in opening or opening in said)


def _label(reduced: Reduced, vocabulary: Vocabulary | None) -> str:
    titles = {t.key: t.title for t in vocabulary.things()} if vocabulary else {}
    if reduced.figure is not None:
        f = reduced.figure
        value = f"{f.low:g}" if f.low == f.high else f"{f.low:g}-{f.high:g}"
        return f"{titles.get(f.thing, f.thing)}: {f.property} {value} {f.unit}"
    return ", ".join(sorted(titles.get(k, k) for k in reduced.things)) or "(names nothing)"


def decide(
    asked: Asked,
    answers: Sequence[Checked],
    vocabulary: Vocabulary | None,
    ranks: Mapping[str, float] | None = None,
) -> Decision:
    """The answer most of `answers` give among those the KB supports, on the question asked.

    Args:
        asked: The question, read (`Asked.read`).
        answers: The judge's own answer first, then the samples' and members'.
        vocabulary: The KB's names and figures (None: answers agree by the entities named).
        ranks: The peer review's mean rank per member (lower is better): a tie-break within
            the side that stands, never between sides.
    """
    ranks = ranks or {}
    judge = answers[0]
    reduced = [reduce(a, asked, vocabulary) for a in answers]
    answers = [_quoted(a, r) for a, r in zip(answers, reduced, strict=True)]
    off = [f"{r.who}: {r.why}" for a, r in zip(answers, reduced, strict=True)
           if a.supported and not r.on_question]  # fmt: skip
    unsupported = [r.who for a, r in zip(answers, reduced, strict=True)
                   if a.supported and not r.direct]  # fmt: skip
    counted = [(a, r) for a, r in zip(answers, reduced, strict=True)
               if a.supported and r.direct and r.on_question]  # fmt: skip
    if len(asked.things) == 1 and any(r.figure is not None for _, r in counted):
        # asked for a figure of one thing: answers that give it outvote those that do not
        figure = f"{asked.property} figure" if asked.property else "figure of the thing asked"
        off += [f"{r.who}: it states no {figure}" for _, r in counted if r.figure is None]
        counted = [(a, r) for a, r in counted if r.figure is not None]
    sides: dict[tuple[object, ...], list[tuple[Checked, Reduced]]] = {}
    for answer, r in counted:
        sides.setdefault(r.key, []).append((answer, r))
    votes = {
        _label(side[0][1], vocabulary): [a.who for a, _ in side]
        for side in sorted(sides.values(), key=lambda s: -sum(r.weight for _, r in s))
    }
    if not sides:
        return _none_supported(judge, reduced[0], asked, votes, off)
    off += [f"{who}: no claim of its direct answer is supported" for who in unsupported]

    def best(side: list[tuple[Checked, Reduced]]) -> Checked:
        if any(a is judge for a, _ in side):
            return judge
        return max((a for a, _ in side), key=lambda a: (a.supported, -ranks.get(a.who, 0.0)))

    weights = {key: sum(r.weight for _, r in side) for key, side in sides.items()}
    top = max(weights.values())
    leaders = [key for key, w in weights.items() if abs(w - top) < 1e-9]
    if len(leaders) > 1:
        split = tuple(best(sides[key]) for key in leaders)
        why = f"the answers split evenly between {len(leaders)}: " + "; ".join(
            f"{label} ({', '.join(who)})" for label, who in votes.items()
        )
        return Decision(None, split, why, votes, off)
    stands = best(sides[leaders[0]])
    n, total = len(sides[leaders[0]]), sum(len(s) for s in sides.values())
    why = "" if stands is judge and n == total else (
        f"{stands.who}'s answer stands: {n} of {total} supported answers give it"
    )  # fmt: skip
    return Decision(stands, (), why, votes, off)


# -- the chunk the answers lead with -----------------------------------------------------------

_ADDED_WORDS = 2
"""Of a first sentence that cites no chunk, the words beyond the question's (names aside) a
chunk must hold for the sentence to lead with it."""


def agreed_lead(
    asked: Asked,
    stands: Checked,
    answers: Sequence[Checked],
    shown: Mapping[str, Shown],
    vocabulary: Vocabulary | None,
) -> str | None:
    """Of a question about one thing, the chunk more answers lead with than `stands` leads with.

    Two chunks of the thing asked may both be true of it: which one answers the question is
    what the answers vote on, where the figure asked does not settle it. An answer leads with
    the chunk of the thing asked that a supported claim of its first sentence cites; a first
    sentence that cites none (a sample's "PETG-CF needs a hardened or ruby nozzle", unchecked
    without an entailment check) leads with the one chunk of that thing holding most of what it
    adds to the question, at least `_ADDED_WORDS` words beyond the question's and the names.
    The verdict quotes that chunk, so its words are never the answer's. A first sentence with
    a dropped claim leads with nothing. None where `stands` leads with no chunk, or none has
    more weight than its own.
    """
    if len(asked.things) != 1 or vocabulary is None:
        return None
    of_thing = {i: _words(f"{c.heading} {c.text}", vocabulary) for i, c in shown.items()
                if getattr(vocabulary.thing_of(i), "key", None) == asked.things[0]}  # fmt: skip
    question = _words(asked.question, vocabulary)

    def lead(answer: Checked) -> str | None:
        opening, said = _opening(answer)
        if any(c.status == "dropped" for c in said):
            return None
        cited = [i for c in said if c.supported for i in c.cited if i in of_thing]
        if cited or any(c.cited for c in said):
            return cited[0] if cited else None
        added = _words(opening, vocabulary) - question
        held = sorted(((len(added & words), i) for i, words in of_thing.items()), reverse=True)
        if not held or held[0][0] < _ADDED_WORDS or (len(held) > 1 and held[1][0] == held[0][0]):
            return None
        return held[0][1]

    own = lead(stands)
    if own is None:
        return None
    votes: dict[str, float] = {}
    for answer in answers:
        if (chunk := lead(answer)) is not None:
            votes[chunk] = votes.get(chunk, 0.0) + _weight(answer)
    best = max(votes, key=lambda i: votes[i])
    return best if best != own and votes[best] > votes[own] else None


def _words(text: str, vocabulary: Vocabulary) -> set[str]:
    """The content words of `text` but those of the names it gives things."""
    return set(content_words(unnamed(text, vocabulary)))


def unnamed(text: str, vocabulary: Vocabulary | None) -> str:
    """`text` with the names of the things it names blanked out (its offsets kept)."""
    for named in reversed(vocabulary.named_in(text) if vocabulary is not None else []):
        end = named.start + len(named.written)
        text = f"{text[: named.start]}{' ' * (end - named.start)}{text[end:]}"
    return text


def _quoted(answer: Checked, reduced: Reduced) -> Checked:
    """`answer` stated in its chunks' words where its own were not theirs (`Reduced.quote`)."""
    if not reduced.quote:
        return answer
    lines = [f"{sentence} [KB#{i}]" for i, sentence in reduced.quote]
    why = "quoted: the chunk's own words for the numbers the answer gave"
    quotes = tuple(
        Claim(line, (i,), "supported", why)
        for line, (i, _) in zip(lines, reduced.quote, strict=True)
    )
    text = "\n".join([" ".join(lines), answer.text]).strip()
    return replace(answer, text=text, claims=(*answer.claims, *quotes))


def _none_supported(
    judge: Checked, own: Reduced, asked: Asked, votes: dict[str, list[str]], off: list[str]
) -> Decision:
    """No supported answer answers the question: the judge's uncited one, or none."""
    if asked.unknown:
        why = f"the question asks about {', '.join(asked.unknown)}: no chunk shown is about it"
        return Decision(Checked(judge.who, not_held(asked.unknown), judge.claims, {}), (), why,
                        votes, off)  # fmt: skip
    if not off and judge.text.strip() and (judge.standing or not judge.claims):
        return Decision(judge, (), "", votes, off)  # uncited claims, no false ones
    why = "no answer had a supported claim that answers the question"
    if off:
        why += f" ({'; '.join(off)})"
    said = OFF_QUESTION if off else NO_ANSWER
    return Decision(Checked(judge.who, said, judge.claims, {}), (), why, votes, off)


def reduced_answer(
    text: str, chunks: Mapping[str, Chunk], ids: list[str] | None = None
) -> str | None:
    """The thing an answer's first line answers with (a KB name), lower case; None if none.

    Args:
        text: The answer.
        chunks: The chunks retrieval supplied, by id.
        ids: The ones the answer's prompt showed (None: all).
    """
    first = next((line for line in text.splitlines() if line.strip(" -*•")), "")
    shown = shown_whole(chunks, ids=ids if ids is not None else list(chunks))
    names = [c.heading for c in chunks.values()]
    named = answer_entities(first, shown, names)
    return next(iter(named), None)
