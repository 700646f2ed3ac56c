"""The KB's vocabulary read from its chunks: each document's names, and its figures by property.

A document is known by its title (its chunks' heading root) and the short forms in the title:
a grade or code ("316", "6061-T6" and "6061", "C110"), the title without it ("stainless steel"),
its head noun when no other title ends in it ("copper" of "C110 copper", "epoxy" of "two-part
epoxy"), a parenthesised alias ("super glue" of "cyanoacrylate (super glue)"), and the title a
longer title starts with ("ABS" of "ABS sheet", "PVA" of "PVA wood glue"). A short form that is
another document's whole title names that document, not this one, unless this title is that
title followed by a word (a form of the same thing: "polycarbonate sheet").

Names match as whole words, longest first, so "PLA" is not found in "PLA-CF"; an acronym
matches in capitals only ("PET", not "pet"); a number ("316") is not a name where a unit follows
it. A name two documents share goes to the one the text's other words fit, read from each
document's own words, else to the one it is the title of, else to both.

A figure is a quantity with a unit (read by `collective.kb.quantities`, with pint), typed by the
words that label it in its chunk: the words before it in its clause ("a nozzle temperature of
190-220 °C", "Janka hardness about 1450 lbf"), else the words after it ("190-220 °C nozzle"),
reconciled with the section's heading ("melts over 1083 °C" under "Density and melting range" is
a melting range), and completed by what its unit measures ("the bed at 50-60 °C" is a bed
temperature, "yield about 276 MPa" a yield strength). Each property has one unit: the one most
of its figures use, the others converted.
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any

from collective.kb.chunking import HEADING_SEPARATOR, heading_root
from collective.kb.quantities import Quantity, in_base_units, quantities
from collective.kb.store import Chunk
from collective.kb.vocabulary import Figure, Named, Thing, Vocabulary
from collective.kb.words import HIGHER, LOWER, STOPWORDS, content_words, stem

__all__ = [
    "KbVocabulary",
    "build_vocabulary",
    "chunk_vocabulary",
    "read_figures",
    "title_names",
    "unify_figures",
    "unit_symbol",
]

_ALIAS = re.compile(r"(?P<base>.+?)\s*\((?P<alias>[^()]+)\)\s*")
_HYPHENATED = re.compile(r"(?P<first>[^\W_]+)-[\w-]+")
_HEDGES = frozenset(
    """about around approximately approx roughly nearly almost typically typical usually up over
    above below under near beyond within just only least most max maximum min minimum very low
    high extremely ca circa rated still slightly higher lower less""".split()
)
"""Words between a figure and its label that say how exact or how bounded it is, not what."""

_KINDS: dict[str, tuple[str, frozenset[str]]] = {
    "[temperature]": (
        "temperature",
        frozenset(map(stem, "temperature temp heat range point".split())),
    ),
    "[time]": ("time", frozenset(map(stem, "time duration life".split()))),
    "[mass] / [length] / [time] ** 2": (
        "strength",
        frozenset(map(stem, "strength stress pressure modulus".split())),
    ),
    "[mass] / [length] ** 3": ("density", frozenset(map(stem, "density weight".split()))),
    "[length] * [mass] / [time] ** 2": (
        "force",
        frozenset(map(stem, "force hardness load".split())),
    ),
    "[length]": (
        "length",
        frozenset(map(stem, "length thickness width diameter size height depth gap".split())),
    ),
    "[length] / [time]": ("speed", frozenset(map(stem, "speed rate velocity".split()))),
    "[currency]": ("price", frozenset(map(stem, "price cost".split()))),
}
"""Per dimensionality: the noun that completes a label ("bed" → "bed temperature"), and the
words that already say what a label measures."""

_NOUN_STEMS = frozenset(stem(w) for noun, _ in _KINDS.values() for w in (noun, "range", "point"))
"""What completes a property's name ("melting range"): a question need not say it."""
_STANDS_FOR = {stem("heat"): stem("temperature"), stem("temp"): stem("temperature")}
"""Everyday nouns that name a kind where they stand alone ("handles more heat", "what temp"),
not where they open a longer name ("heat resistance", "heat capacity")."""
_TOKEN = re.compile(r"[A-Za-z]+|[^\sA-Za-z]")
_ORDER = frozenset({"first", "last", "sooner", "soonest", "later", "latest"})
"""Words that compare things by when a property's figure is reached ("melts first")."""
_CURRENCY = re.compile(
    r"(?P<symbol>[$€£¥])\s?(?P<low>\d[\d,]*(?:\.\d+)?)(?:\s?(?:-|–|to)\s?[$€£¥]?\s?"
    r"(?P<high>\d[\d,]*(?:\.\d+)?))?"
)
_CURRENCY_UNITS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}


# -- names -------------------------------------------------------------------------------


def _is_acronym(name: str) -> bool:
    """Whether `name` is written in capitals (`PVA`, `PLA-CF`, `PA6`): matched in capitals only."""
    letters = re.sub(r"[^A-Za-z]", "", name)
    return len(letters) >= 2 and letters.isupper()


def _is_code(word: str) -> bool:
    """A grade or code: a word with a digit (`316`, `6061-T6`, `C110`, `95A`)."""
    return bool(re.search(r"\d", word))


def _usable(name: str) -> bool:
    """Whether a short form can stand as a name (not a stop word, not a bare short number)."""
    name = name.strip()
    if not name or name.lower() in STOPWORDS:
        return False
    if name.isdigit():
        return len(name) >= 3
    return len(name) >= 2


def _short_forms(title: str, titles: Mapping[str, str]) -> tuple[list[str], list[str], list[str]]:
    """What `title` itself says it is called: (its own names, shared names, head nouns).

    Own names are the title, a parenthesised alias, codes and the title without its codes;
    shared names are another title this one starts with, as a form of it (`titles`: every title
    by its lower case); head nouns are the single last word, a name only when no other title
    ends in it.
    """
    own = [title]
    base = title
    if alias := _ALIAS.fullmatch(title):
        base = alias["base"].strip()
        own += [base, alias["alias"].strip()]
    words = base.split()
    shared: list[str] = []
    for n in range(1, len(words)):  # "ABS sheet" is ABS as sheet; "PVA wood glue" PVA as glue
        if (other := titles.get(" ".join(words[:n]).lower())) is not None:
            shared += [other, f"{other} {words[-1]}"]
    codes = [w for w in words if _is_code(w)]
    for code in codes:
        own.append(code)
        if (first := _HYPHENATED.fullmatch(code)) and _is_code(first["first"]):
            own.append(first["first"])  # 6061 of 6061-T6
    for word in words:
        first = _HYPHENATED.fullmatch(word)
        if first and not _is_code(word) and len(first["first"]) >= 3 and first["first"].isupper():
            own.append(first["first"])  # UHMW of UHMW-PE; PLA of PLA-CF goes to PLA's document
    rest = [w for w in words if not _is_code(w)]
    heads: list[str] = []
    if not shared:
        if codes and rest:
            own.append(" ".join(rest))  # "stainless steel" of "316 stainless steel"
        own += [" ".join(rest[i:]) for i in range(1, len(rest) - 1)]  # "white pine"
        if len(words) > 1 and rest:
            heads.append(rest[-1].split("-")[-1] if "-" in rest[-1] else rest[-1])
    return own, shared, heads


def _generic(name: str, count: Counter[str]) -> bool:
    """A common noun two titles end in (`nylon`, `aluminium`): it names no one document."""
    return " " not in name and not _is_acronym(name) and count[name.lower()] > 1


def title_names(titles: Mapping[str, str], tags: Iterable[str] = ()) -> dict[str, tuple[str, ...]]:
    """Every name each document's title gives it, the title first (see the module docstring).

    Args:
        titles: Each document's title, by its key.
        tags: The KB's tags: a category ("adhesive") names no one document.

    Returns:
        The names by key, each list without repeats (case-insensitively).
    """
    categories = {t.lower() for t in tags}
    whole = {t.lower(): key for key, t in titles.items()}
    lowered = {t.lower(): t for t in titles.values()}
    forms = {key: _short_forms(title, lowered) for key, title in titles.items()}
    head_count = Counter(h.lower() for _, _, heads in forms.values() for h in heads)
    word_count = Counter(
        n.lower() for own, _, heads in forms.values() for n in {*own, *heads} if " " not in n
    )
    names: dict[str, tuple[str, ...]] = {}
    for key, (own, shared, heads) in forms.items():
        kept = [titles[key]]
        for name in own:
            # A short form that is another document's title names that document.
            if whole.get(name.lower(), key) == key:
                kept.append(name)
        kept += shared
        kept += [h for h in heads if head_count[h.lower()] == 1 and h.lower() not in whole]
        kept = [
            n
            for n in kept
            if n == titles[key]
            or (_usable(n) and n.lower() not in categories and not _generic(n, word_count))
        ]
        names[key] = tuple(dict.fromkeys(kept))
    return names


def _name_pattern(name: str) -> str:
    """A name as a pattern: its words joined by a space, a hyphen or nothing (`6061 T6`)."""
    parts = [re.escape(p) for p in re.split(r"[\s-]+", name.strip()) if p]
    return r"[\s-]?".join(parts)


@dataclass(frozen=True)
class _Match:
    start: int
    end: int
    keys: tuple[str, ...]
    exact: tuple[str, ...]
    """The keys whose title the text wrote (a tie goes to them)."""


class _Names:
    """Finds the names of a set of things in text, longest first, word-bounded."""

    def __init__(self, things: Sequence[Thing]) -> None:
        self.keys: dict[str, list[str]] = defaultdict(list)
        self.titled: dict[str, set[str]] = defaultdict(set)
        for thing in things:
            self.titled[thing.title.lower()].add(thing.key)
            for name in thing.names:
                if thing.key not in self.keys[name.lower()]:
                    self.keys[name.lower()].append(thing.key)
        self.spelled = {n: _name_pattern(n) for n in self.keys}
        acronyms = [n for t in things for n in t.names if _is_acronym(n)]
        words = [n for n in self.keys if not any(a.lower() == n for a in acronyms)]
        self.cased = self._compile(acronyms, 0)
        self.uncased = self._compile(words, re.IGNORECASE)
        self.lookup = {re.sub(r"[\s-]+", "", n): n for n in self.keys}

    @staticmethod
    def _compile(names: Iterable[str], flags: int) -> re.Pattern[str] | None:
        patterns = sorted({_name_pattern(n) for n in names}, key=len, reverse=True)
        if not patterns:
            return None
        return re.compile(rf"(?<![\w°º˚-])(?:{'|'.join(patterns)})(?![\w]|-\w)", flags)

    def find(self, text: str) -> list[_Match]:
        found = []
        for pattern in (self.cased, self.uncased):
            if pattern is not None:
                found += [(m.start(), m.end()) for m in pattern.finditer(text)]
        found.sort(key=lambda span: (span[0], -(span[1] - span[0])))
        out: list[_Match] = []
        end = -1
        for start, stop in found:
            if start < end:
                continue
            written = text[start:stop]
            name = self.lookup.get(re.sub(r"[\s-]+", "", written.lower()))
            if name is None or (written.isdigit() and _unit_follows(text, start, stop)):
                continue
            keys = tuple(self.keys[name])
            out.append(_Match(start, stop, keys, tuple(sorted(self.titled.get(name, set())))))
            end = stop
        return out


def _unit_follows(text: str, start: int, end: int) -> bool:
    """Whether the number at `start:end` is a quantity (`316 °C`, `316 MPa`), not a name."""
    after = re.match(r"\s?(\S+)", text[end:])
    if after is None or after.group(1).rstrip(".,;:)").lower() in STOPWORDS:
        return False
    return any(q.unit and q.start == 0 for q in quantities(text[start : end + after.end()]))


# -- figures -----------------------------------------------------------------------------


def _dimension(unit: str) -> str:
    if unit in _CURRENCY_UNITS.values():
        return "[currency]"
    based = in_base_units(Quantity(1.0, 1.0, unit, 0, 0)) if unit else None
    return based[0] if based else ""


def _quantities(text: str) -> list[Quantity]:
    """The quantities of `text` with a unit, money included (`$12`, `€5-8`)."""
    found = [q for q in quantities(text) if q.unit]
    for m in _CURRENCY.finditer(text):
        low = float(m["low"].replace(",", ""))
        high = float(m["high"].replace(",", "")) if m["high"] else low
        unit = _CURRENCY_UNITS[m["symbol"]]
        found = [q for q in found if q.end <= m.start() or q.start >= m.end()]
        found.append(Quantity(min(low, high), max(low, high), unit, m.start(), m.end()))
    return sorted(found, key=lambda q: q.start)


def _clause_of(text: str, own: set[str]) -> set[str]:
    """The content words of the stretch of `text` between two figures that holds `own`."""
    cuts = [0, *(x for q in _quantities(text) for x in (q.start, q.end)), len(text)]
    pieces = [set(content_words(text[a:b])) for a, b in zip(cuts[::2], cuts[1::2], strict=False)]
    return next((p for p in pieces if own & p), set(content_words(text)))


_CLAUSE = re.compile(r"[;:]\s|\(")
_BREAK = re.compile(r"[;:]\s")
_TOKEN = re.compile(r"[^\W_][\w'’-]*|[^\w\s]")


def _runs(text: str) -> list[list[str]]:
    """`text`'s runs of label words: broken by stop words, hedges, punctuation and names."""
    runs: list[list[str]] = [[]]
    for token in _TOKEN.findall(text):
        word = token.lower()
        if (
            not token[0].isalnum()
            or word in STOPWORDS
            or word in _HEDGES
            or word.isdigit()
            or (len(word) >= 5 and word.endswith("ly") and not word.endswith("ply"))  # slowly
        ):
            runs.append([])
        else:
            runs[-1].append(token)
    return [r for r in runs if r]


def _label(words: list[str]) -> str:
    words = words[-2:]
    return " ".join(w if _is_acronym(w) else w.lower() for w in words)


def _heading_parts(heading: str) -> list[str]:
    last = heading.split(HEADING_SEPARATOR)[-1] if HEADING_SEPARATOR in heading else ""
    return [p.strip().lower() for p in re.split(r",|&|/|\band\b", last) if p.strip()]


def _property(
    before: str, after: str, heading: str, dimension: str, alone: bool
) -> tuple[str | None, bool]:
    """The property a figure's label names (see the module docstring), None when none does.

    Returns:
        The property, and whether its label was the words after the figure.
    """
    runs = _runs(before)
    label = _label(runs[-1]) if runs else ""
    after_runs = _runs(after)
    labelled_after = not label and bool(after_runs) and after.split()[0] == after_runs[0][0]
    if labelled_after:
        label = _label(after_runs[0][:2])  # "190-220 °C nozzle"
    noun, says = _KINDS.get(dimension, ("", frozenset()))
    others = frozenset().union(*(w for d, (_, w) in _KINDS.items() if d != dimension)) - says
    parts = [p for p in _heading_parts(heading) if not set(content_words(p)) & others]
    label_stems = set(content_words(label))
    chosen = label
    for part in parts:
        part_stems = set(content_words(part))
        if (label_stems - says) & (part_stems - says):
            chosen = label if label_stems > part_stems else part  # "Janka hardness"; "drying"
            break
    else:
        kind_parts = [p for p in parts if set(content_words(p)) & says]
        if not label:
            chosen = kind_parts[0] if len(kind_parts) == 1 else parts[0] if len(parts) == 1 else ""
        elif alone and not label_stems & says and len(kind_parts) == 1:
            chosen = kind_parts[0]  # "fails above about 80 °C" under "Temperature range"
    if not chosen:
        return None, False
    if noun and not set(content_words(chosen)) & says:
        chosen = f"{chosen} {noun}"
    elif noun and " " not in chosen and set(content_words(chosen)) <= says:
        chosen = noun  # "costs $12": a price; "weighs 2 kg/m3"... a density
    return chosen, labelled_after


def read_figures(
    text: str, *, thing: str, chunk_id: str, heading: str = "", names: Vocabulary | None = None
) -> list[Figure]:
    """The figures one chunk states, each with the property its words name, in its own unit.

    Args:
        text: The chunk's body.
        thing: The key of the document the chunk belongs to.
        chunk_id: The chunk's id.
        heading: The chunk's heading path (its last part names what the section is about).
        names: The KB's vocabulary: names in the text are not read as figures or labels.

    Returns:
        The figures in order; `unify_figures` groups them by property in one unit each.
    """
    out: list[Figure] = []
    for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9])|\n+", text):
        masked = sentence
        if names is not None:
            for named in names.named_in(sentence):
                end = named.start + len(named.written)
                masked = masked[: named.start] + ",".ljust(end - named.start) + masked[end:]
        found = _quantities(masked)
        dims = Counter(_dimension(q.unit) for q in found)
        previous = 0
        for i, q in enumerate(found):
            clause = max([previous, *(m.end() for m in _CLAUSE.finditer(masked, 0, q.start))])
            if not _runs(masked[clause : q.start]) and masked[clause - 1 : clause] == "(":
                paren = clause - 1  # "print slowly (15-30 mm/s)": the words before the bracket
                start = max([previous, *(m.end() for m in _BREAK.finditer(masked, 0, paren))])
                before = masked[start:paren]
            else:
                before = masked[clause : q.start]
            stop = found[i + 1].start if i + 1 < len(found) else len(masked)
            boundary = re.search(r"[;:,.()]|\s(?:and|with|for|but)\s", masked[q.end : stop])
            after = masked[q.end : q.end + boundary.start() if boundary else stop]
            dimension = _dimension(q.unit)
            prop, labelled_after = _property(
                before, after, heading, dimension, dims[dimension] == 1
            )
            previous = q.end + len(after) if labelled_after else q.end
            if prop:
                out.append(Figure(thing, chunk_id, prop, q.low, q.high, q.unit, sentence.strip()))
    return out


def _affine(unit: str) -> tuple[float, float] | None:
    """`unit` in base units as `a * value + b` (so °C, with its offset, converts too)."""
    zero, one = (in_base_units(Quantity(v, v, unit, 0, 0)) for v in (0.0, 1.0))
    if zero is None or one is None:
        return None
    return one[1] - zero[1], zero[1]


def _convert(value: float, unit: str, to: str) -> float | None:
    if unit == to:
        return value
    source, target = _affine(unit), _affine(to)
    if source is None or target is None or target[0] == 0:
        return None
    return (source[0] * value + source[1] - target[1]) / target[0]


def unify_figures(figures: Iterable[Figure]) -> list[Figure]:
    """Figures grouped by property, each property in one unit.

    Wordings that differ only in inflection share a name (the most used spelling). A property
    whose figures measure two things (a hardness in lbf and in HRC) is split, the minority
    named with its unit. Each group's unit is the one most of its figures use; the others are
    converted (pint).
    """
    figures = list(figures)
    spelled: dict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
    for f in figures:
        spelled[tuple(content_words(f.property))][f.property] += 1
    canonical = {k: c.most_common(1)[0][0] for k, c in spelled.items()}
    groups: dict[str, list[Figure]] = defaultdict(list)
    for f in figures:
        groups[canonical[tuple(content_words(f.property))]].append(f)
    out: list[Figure] = []
    for prop, members in groups.items():
        by_dimension: dict[str, list[Figure]] = defaultdict(list)
        for f in members:
            by_dimension[_dimension(f.unit) or f.unit].append(f)
        ranked = sorted(by_dimension.values(), key=len, reverse=True)
        for n, same in enumerate(ranked):
            unit = Counter(f.unit for f in same).most_common(1)[0][0]
            name = prop if n == 0 else f"{prop} ({unit})"
            for f in same:
                low, high = _convert(f.low, f.unit, unit), _convert(f.high, f.unit, unit)
                if low is None or high is None:
                    continue
                out.append(replace(f, property=name, low=low, high=high, unit=unit))
    return out


def unit_symbol(unit: str) -> str:
    """A unit as people write it (`degree_Celsius`: `°C`, `gram / centimeter ** 3`: `g/cm³`)."""
    if unit in _CURRENCY_UNITS.values() or not _dimension(unit):
        return unit.upper() if unit.isalpha() and len(unit) <= 4 else unit
    symbol = f"{_units().Unit(unit):~P}"
    return symbol.replace("force_pound", "lbf")


@functools.cache
def _units() -> Any:
    import pint

    return pint.UnitRegistry(cache_folder=":auto:")


# -- questions ---------------------------------------------------------------------------

_ASKS = {
    "cheap": "price", "expensive": "price", "costly": "price", "pricey": "price", "cost": "price",
    "affordable": "price", "light": "density", "heavy": "density", "dense": "density",
    "weight": "density", "hard": "hardness", "soft": "hardness", "strong": "strength",
    "weak": "strength", "hot": "temperature", "cold": "temperature", "warm": "temperature",
    "cool": "temperature", "slippery": "friction", "slick": "friction", "weigh": "density",
    "long": "time", "short": "time", "quick": "time", "fast": "time", "slow": "time",
}  # fmt: skip
"""What an adjective or its comparison asks for (`cheapest`: price): nouns of English, matched
against the KB's own property names."""


_WHETHER = re.compile(
    r"\W*(?:do|does|did|is|are|was|were|can|could|should|must|will|would|has|have|had|may|"
    r"might|need)\b",
    re.IGNORECASE,
)
"""A question that opens with an auxiliary asks whether, not how much."""


def _standing_alone(text: str, words: Iterable[str]) -> set[str]:
    """Of `words` (stems), those `text` uses with no content word after them."""
    tokens = _TOKEN.findall(text)
    return {
        s
        for n, token in enumerate(tokens)
        if (s := stem(token.lower())) in words
        and not (n + 1 < len(tokens) and content_words(tokens[n + 1]))
    }


def _name_and_folder_words(thing: Thing) -> set[str]:
    """The words of `thing`'s names and of its folder ("filament" of filament/pla.md)."""
    return {*thing.words, *content_words(thing.key.rpartition("/")[0])}


def _asked(word: str) -> str | None:
    """The noun `word`'s comparison asks for (`heaviest`, `densest`, `hotter`), if any."""
    w = word.lower()
    roots = [w, stem(w)]
    for suffix in ("est", "er"):
        if w.endswith(suffix) and len(w) > len(suffix) + 2:
            root = w[: -len(suffix)]
            roots += [
                root,
                root + "e",
                root[:-1] + "y",
                root[:-1] if root[-1] == root[-2] else root,
            ]
    return next((_ASKS[r] for r in roots if r in _ASKS), None)


# -- the vocabulary ----------------------------------------------------------------------


class KbVocabulary(Vocabulary):
    """A `Vocabulary` over things, their chunks' words and their figures."""

    def __init__(
        self,
        things: Sequence[Thing],
        chunks: Mapping[str, str] | Callable[[str], str | None],
        words: Mapping[str, frozenset[str]] | Callable[[str], frozenset[str]],
        figures: Sequence[Figure] = (),
    ) -> None:
        """A vocabulary.

        Args:
            things: Every document, with its names.
            chunks: The key of each chunk's document, by chunk id (a mapping, or a function
                giving None for a chunk the KB does not hold).
            words: Each document's content-word stems, by key (to tell a shared name apart):
                a mapping, or a function asked only when a shared name is met.
            figures: Every figure, already unified (`unify_figures`).
        """
        self._things = list(things)
        self._by_key = {t.key: t for t in self._things}
        self._chunks = chunks.get if isinstance(chunks, Mapping) else chunks
        self._words_of = words
        self._figures = list(figures)
        self._names = _Names(self._things)
        by_property: dict[str, list[Figure]] = defaultdict(list)
        for f in self._figures:
            by_property[f.property].append(f)
        self._by_property = dict(by_property)

    def loaded(self, chunk_ids: Iterable[str]) -> KbVocabulary:
        """This vocabulary with everything it would look up read now, for `chunk_ids`.

        A store's vocabulary reads a chunk's document and a shared name's words from the KB when
        asked; this one holds them (the judge's, built in a worker thread, then read on the
        event loop without touching the KB).
        """
        chunks = {i: key for i in chunk_ids if (key := self._chunks(i)) is not None}
        shared = {k for keys in self._names.keys.values() if len(keys) > 1 for k in keys}
        words = {k: self._words(k) for k in sorted(shared)}
        return KbVocabulary(self._things, chunks, words, self._figures)

    def _words(self, key: str) -> frozenset[str]:
        if isinstance(self._words_of, Mapping):
            return self._words_of.get(key, frozenset())
        return self._words_of(key)

    def things(self) -> list[Thing]:
        """Every document the KB holds."""
        return list(self._things)

    def thing_of(self, chunk_id: str) -> Thing | None:
        """The document a chunk belongs to (None for a chunk the KB does not hold)."""
        key = self._chunks(chunk_id)
        return self._by_key.get(key) if key is not None else None

    def named_in(self, text: str) -> list[Named]:
        """The things `text` names, in order, each by its longest matching name.

        A name two documents share goes to the one whose words the text's other words fit,
        else to the one it is the title of, else to each of them.
        """
        matches = self._names.find(text)
        out: list[Named] = []
        rest: set[str] | None = None
        for m in matches:
            keys = m.keys
            if len(keys) > 1:
                if rest is None:
                    chars = list(text)
                    for other in matches:
                        chars[other.start : other.end] = " " * (other.end - other.start)
                    rest = set(content_words("".join(chars)))
                keys = self._pick(keys, m.exact, rest)
            written = text[m.start : m.end]
            out += [Named(self._by_key[k], written, m.start) for k in keys]
        return out

    def _pick(
        self, keys: tuple[str, ...], titled: tuple[str, ...], rest: set[str]
    ) -> tuple[str, ...]:
        words = {k: self._words(k) for k in keys}
        common = frozenset.intersection(*words.values())
        fit = {k: len((words[k] - common) & rest) for k in keys}
        best = max(fit.values())
        if best > 0:
            return tuple(k for k in keys if fit[k] == best)
        return titled or keys

    def properties(self) -> list[str]:
        """Every property the KB has figures of, by canonical name, sorted."""
        return sorted(self._by_property)

    def property_asked(self, text: str) -> str | None:
        """The property a question asks about, among those the KB has figures of.

        A property whose name the text uses ("nozzle temperature", "density") is asked; else
        the noun an adjective's comparison asks for ("lightest": density) picks the properties
        that name it, as does a kind the text names as a noun ("at the lowest temperature"),
        among the properties the KB has of the things it names; its own words count twice the
        kind's noun. Among several, those with figures of the things the text names win, then
        the one with most figures. None when the KB has no figure of what is asked.

        A question that asks whether ("Do I have to dry PP?") asks a figure only where it names
        the property whole or asks its kind (an adjective, or a quantity it states: "at 80 °C");
        a verb that shares a property's word ("dry" of "drying temperature") asks none. The
        names of things ask nothing ("hot melt glue" neither a temperature nor a melting range).
        """
        whole = text
        named_in = self.named_in(text)
        for n in named_in:
            text = f"{text[: n.start]}{' ' * len(n.written)}{text[n.start + len(n.written) :]}"
        stems = set(content_words(text))
        tokens = re.findall(r"[A-Za-z]+", text)
        asked = {a for w in tokens if (a := _asked(w))}
        asked_stems = {stem(a) for a in asked}
        stated = {_dimension(q.unit) for q in _quantities(whole)}
        whether = _WHETHER.match(whole) is not None
        # an adjective of one kind ("warm": a temperature) rules out properties of another
        # kind named only in part ("print speed" off "printing"); "fast" may ask a time or a
        # speed, so a time asked rules out nothing
        kinds = set() if stem("time") in asked_stems else set(asked_stems)
        # a kind the question names ("at the lowest temperature") asks it as an adjective does
        named_kinds = {stem(noun) for noun, _ in _KINDS.values()} & stems
        named_kinds |= {_STANDS_FOR[w] for w in _standing_alone(text, _STANDS_FOR)}
        kinds |= named_kinds
        named = {n.thing.key for n in named_in}
        # a word that asks a quantity: its kind, a figure stated, or a comparison ("melts first")
        compares = {w.lower() for w in tokens} & (HIGHER | LOWER | _ORDER)
        quantity = bool(asked_stems or named_kinds or stated or compares)
        # a kind of thing asked for ("which glue"): the things whose names or folder say it
        of = named or self._of_kind(stems)
        scored: dict[str, int] = {}
        for prop, figures in self._by_property.items():
            words = set(content_words(prop))
            own = words - _NOUN_STEMS  # "nozzle" of "nozzle temperature", all of "heat resistance"
            says = _KINDS.get(_dimension(figures[0].unit), ("", frozenset()))[1]
            if kinds and says and not (words | says) & kinds and not words <= stems:
                continue
            kind = bool((words | says) & asked_stems) or _dimension(figures[0].unit) in stated
            if whether and not words <= stems and not kind:
                continue
            # a property asked by its kind's noun alone is one the KB has of the things named
            of_named = not of or any(f.thing in of for f in figures)
            # named in part ("nozzle"), with no word that asks a quantity: the nozzle, not its
            # temperature ("What kind of nozzle do I need?")
            part = own and own <= stems and (words <= stems or quantity or says & stems)
            if part or words & asked_stems or (words & named_kinds and of_named):
                # its own words count twice its kind's noun: "melts at the lowest temperature"
                # asks the melting range before any other temperature
                scored[prop] = (2 * len(own & stems) + len((words - own) & stems)
                                + len(words & asked_stems))  # fmt: skip
        if not scored:
            return None
        covered = {p: len({f.thing for f in self._by_property[p]} & named) for p in scored}
        rank = {p: (scored[p], covered[p], len(self._by_property[p])) for p in scored}
        best = max(rank.values())
        tied = sorted(p for p in rank if rank[p] == best)
        if len(tied) > 1:  # "prints hottest": the nozzle's, stated as what a filament prints at
            tied = self._stated_with(tied, stems, named)
        return tied[0] if len(tied) == 1 else None  # "how hot": nozzle or bed? not told

    def _of_kind(self, stems: set[str]) -> set[str]:
        """The things of a kind `stems` name: a word of several things' names, or their folder."""
        words = {t.key: _name_and_folder_words(t) for t in self._things}
        counts = Counter(w for ws in words.values() for w in ws)
        kinds = {w for w in stems if counts[w] > 1}
        return {key for key, ws in words.items() if ws & kinds}

    def _stated_with(self, tied: list[str], stems: set[str], named: set[str]) -> list[str]:
        """Of properties a question asks alike, those the KB states with its other words.

        "Which prints hottest" asks a temperature: the nozzle's and the bed's alike. The KB's
        own sentences tell them apart: "prints at a nozzle temperature of 220-240 °C", "with
        the bed at 90-110 °C". Each property scores the share of its figures (of the things
        named, if any) whose clause, the words between the figure and the one before it that
        name the property, holds every word of the question that names no property, thing or kind
        ("How warm should the build plate be when printing PLA?" asks of a "build plate" that
        no clause names: told apart by none).
        """
        things = [t for t in self._things if t.key in named]
        # the words of their names and of their folders' ("which filament": filament/pla.md)
        names = {w for t in things for w in _name_and_folder_words(t)}
        told = stems - names - _NOUN_STEMS - {w for p in tied for w in content_words(p)}
        # "hottest" asks the kind, "lowest" the direction: neither tells which
        told = {w for w in told if _asked(w) is None} - {stem(w) for w in HIGHER | LOWER}
        if not told:
            return tied
        share: dict[str, float] = {}
        for prop in tied:
            own = set(content_words(prop)) - _NOUN_STEMS
            figures = [f for f in self._by_property[prop] if not named or f.thing in named]
            figures = figures or self._by_property[prop]
            said = [told <= _clause_of(f.text, own) for f in figures]
            share[prop] = sum(said) / len(figures)
        best = max(share.values())
        return [p for p in tied if share[p] == best] if best > 0 else tied

    def figures(self, property: str, things: Iterable[str] = ()) -> list[Figure]:
        """The figures of one property, of the `things` given (keys; all when empty)."""
        wanted = set(things)
        return [f for f in self._by_property.get(property, []) if not wanted or f.thing in wanted]


# -- read from chunks --------------------------------------------------------------------


def _title_of(chunk: Chunk) -> str:
    root = heading_root(chunk.heading) if chunk.heading else ""
    return root or PurePath(chunk.source).stem.replace("_", " ") or chunk.source


def build_vocabulary(
    titles: Mapping[str, str],
    chunks: Mapping[str, str] | Callable[[str], str | None],
    words: Mapping[str, frozenset[str]] | Callable[[str], frozenset[str]],
    figures: Iterable[Figure] = (),
    *,
    tags: Iterable[str] = (),
    learned: Mapping[str, Iterable[str]] | None = None,
    added: Mapping[str, Iterable[str]] | None = None,
    removed: Mapping[str, Iterable[str]] | None = None,
) -> KbVocabulary:
    """A vocabulary of documents named by their titles and by what was learned of them.

    Args:
        titles: Each document's title, by key.
        chunks: Each chunk's document key, by chunk id (see `KbVocabulary`).
        words: Each document's content-word stems (see `KbVocabulary`).
        figures: The figures as each chunk states them (`read_figures`): unified here.
        tags: The KB's tags (a category names no one document).
        learned: Names a model or the file's front matter gave, by key: each kept only where
            it names no other document better (another's title or short form, a category, a
            common noun given to two documents).
        added: Names a user added, by key: always kept.
        removed: Names a user removed, by key (a title stays).

    Returns:
        The vocabulary.
    """
    tags = set(tags)
    derived = title_names(titles, tags)
    owners: dict[str, set[str]] = defaultdict(set)
    for key, own in derived.items():
        for name in own:
            owners[name.lower()].add(key)
    categories = {t.lower() for t in tags}
    given = Counter(
        n.lower() for names in (learned or {}).values() for n in {m.lower() for m in names}
    )
    things = []
    for key, title in titles.items():
        names = list(derived[key])
        for name in (learned or {}).get(key, ()):
            lower = name.lower()
            if not _usable(name) or lower in categories:
                continue
            if owners.get(lower, {key}) - {key} and key not in owners.get(lower, set()):
                continue  # another document's title or short form
            if " " not in name and not _is_acronym(name) and given[lower] > 1:
                continue  # a common noun: "nylon" for every nylon
            names.append(name)
        names += [n for n in (added or {}).get(key, ()) if n.strip()]
        seen = {n.lower() for n in (removed or {}).get(key, ())} - {title.lower()}
        kept = []
        for name in names:  # the title first, each name once
            if name.lower() not in seen:
                seen.add(name.lower())
                kept.append(name)
        things.append(Thing(key, title, tuple(kept)))
    return KbVocabulary(things, chunks, words, unify_figures(figures))


def chunk_vocabulary(chunks: Sequence[Chunk]) -> KbVocabulary:
    """The vocabulary of a list of chunks alone: a document per source, named by its title.

    A source whose chunks sit under two heading roots holds two things (keyed `source#title`).
    """
    roots: dict[str, list[str]] = defaultdict(list)
    for chunk in chunks:
        title = _title_of(chunk)
        if title not in roots[chunk.source]:
            roots[chunk.source].append(title)
    key_of: dict[tuple[str, str], str] = {}
    for source, under in roots.items():
        for title in under:
            key_of[source, title] = source if len(under) == 1 else f"{source}#{title}"
    titles = {key: title for (_, title), key in key_of.items()}
    tags = {t for c in chunks for t in c.tags}
    owner = {c.id: key_of[c.source, _title_of(c)] for c in chunks}
    words: dict[str, set[str]] = defaultdict(set)
    for c in chunks:
        words[owner[c.id]] |= set(content_words(f"{c.heading} {c.text} {' '.join(c.tags)}"))
    frozen = {k: frozenset(v) for k, v in words.items()}
    plain = build_vocabulary(titles, owner, frozen, tags=tags)
    figures = [
        f
        for c in chunks
        for f in read_figures(
            c.text, thing=owner[c.id], chunk_id=c.id, heading=c.heading, names=plain
        )
    ]
    return build_vocabulary(titles, owner, frozen, figures, tags=tags)
