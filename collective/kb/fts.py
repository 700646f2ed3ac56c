"""What SQLite's FTS5 (`porter unicode61`) would match, read in Python.

The query's terms, and which texts hold each of them.

FTS5 ranks candidates; which query words a candidate holds is read from its own text
(`presence`), with FTS5's own tokenizer imitated: unicode61's folding and tokens, the Porter
stemmer's stems (Snowball's Porter, FTS5's algorithm; the project's other readers use
`collective.kb.words`).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from collective.kb.words import STOPWORDS

__all__ = ["presence", "query_terms"]

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


def query_terms(query: str, limit: int = 32) -> list[str]:
    """The content words of a query: lower-cased, stopwords dropped, deduplicated, in order."""
    words = (w.lower().replace("’", "'") for w in _WORD.findall(query))
    terms = [w for w in words if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]
    return list(dict.fromkeys(terms))[:limit]


_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
"""A token as FTS5's unicode61 tokenizer cuts one: a run of letters and digits."""


def presence(texts: dict[int, str], terms: Sequence[str]) -> dict[str, set[int]]:
    """For each term, the texts (by rowid) FTS5's `porter unicode61` tokenizer would match it in.

    Stems by Snowball's Porter stemmer, the same as SQLite's for all but 37 of 22,856 English
    words (measured; those differ alike for every form of a word, as `analogy`/`analogies`).
    A word can only have a stem it starts with, less the stem's last letter (true of every
    word measured): each stem is one scan of the texts for that prefix.
    """
    rowids = list(texts)
    folded = [_folded(text) for text in texts.values()]  # folding may change a text's length
    joined = "\n".join(folded)
    starts = list(itertools.accumulate((len(text) + 1 for text in folded), initial=0))
    present = {}
    for term in terms:
        found: set[int] | None = None
        for token in _TOKEN.findall(_folded(term)):
            stem = _porter(token)
            holding = {
                rowids[bisect.bisect_right(starts, m.start()) - 1]
                for m in _starting(stem[: max(1, len(stem) - 1)]).finditer(joined)
                if not (m.start() and joined[m.start() - 1].isalnum()) and _porter(m[0]) == stem
            }
            found = holding if found is None else found & holding
        present[term] = found or set()
    return present


def _folded(text: str) -> str:
    """`text` lower-cased and without diacritics, as FTS5's unicode61 tokenizer reads it."""
    if not text.isascii():
        text = "".join(
            c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)
        )
    return text.lower()


@functools.lru_cache(maxsize=1024)
def _starting(prefix: str) -> re.Pattern[str]:
    """The rest of a token from `prefix` on (the caller checks where the token starts)."""
    return re.compile(rf"{re.escape(prefix)}[^\W_]*", re.UNICODE)


@functools.lru_cache(maxsize=65536)
def _porter(token: str) -> str:
    """`token` stemmed as FTS5's porter tokenizer stems it (tokens under 3 letters as they are)."""
    return str(_porter_stemmer().stemWord(token)) if 3 <= len(token) <= 64 else token


@functools.cache
def _porter_stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("porter")
