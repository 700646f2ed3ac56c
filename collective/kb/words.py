"""Words of English text: the word lists and the stemmer the KB's readers share.

One list of function words, one of the words that say a comparison's direction, and one
stemmer (Snowball's English, the Porter2 algorithm), so the names, the figures' properties and
the questions are read alike.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["HIGHER", "LOWER", "STOPWORDS", "content_words", "stem"]

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves i'm i've it's don't doesn't isn't can't won't""".split()
)
"""Function words: no name, property or topic is one of them."""

HIGHER = frozenset(
    """highest higher greatest greater largest larger biggest bigger maximum heaviest heavier
    densest denser hottest hotter warmest warmer strongest stronger hardest harder stiffest
    stiffer toughest tougher longest longer thickest thicker""".split()
)
"""Words that ask for the higher figure of a comparison: its direction, never its property."""
LOWER = frozenset(
    """lowest lower smallest smaller minimum lightest lighter coolest cooler coldest colder
    weakest weaker softest softer cheapest cheaper thinnest thinner shortest shorter""".split()
)
"""Words that ask for the lower figure of a comparison."""

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """`word`'s stem, lower case (`temperatures` and `temperature` share `temperatur`)."""
    return str(_stemmer().stemWord(word.lower().replace("’", "'")))


@functools.cache
def _stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def content_words(text: str) -> list[str]:
    """The stems of `text`'s words that are not stop words, in order."""
    return [stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]
