"""Whether an answer states what a correct one states, and paired bootstrap intervals.

Correct means: every gold number appears in the answer (outside its citation tags); the gold
entity is named first among the question's entities (a restated list of them names none); every
gold string appears. An answer that parrots the prompt or raw KB lines (`[Score: ...]`, section
headers, the system prompt) is wrong whatever it states.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from collective.kb.citations import without_tags

if TYPE_CHECKING:
    from collective.evaluation.questions import EvalQuestion

__all__ = ["aliases", "bootstrap_diff", "is_parrot", "numbers_in", "score"]

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_PARROT = ("[Score:", "## Knowledge base", "## Task", "You are the judge", "You are specialist")
_JOIN = re.compile(r"\s*(?:,\s*)?(?:(?:or|and)\s+)?")


def numbers_in(text: str) -> list[float]:
    """The numbers a text states (`1,360` is 1360; a range `190–220` is two)."""
    return [float(n.replace(",", "")) for n in _NUMBER.findall(text.replace("–", "-"))]


def aliases(name: str) -> list[str]:
    """Ways an answer may name an entity (lower case).

    Its name, without a parenthesis or a stock form (`PEEK rod` -> `PEEK`), and a first word
    that is a code (`6061-T6`, `PA6`, `C360`).
    """
    out = [name, re.sub(r"\s*\(.*?\)", "", name)]
    out.append(re.sub(r"\s+(sheet|rod|nylon|aluminium|stainless steel|tool steel)$", "", name))
    first = name.split()[0] if name.split() else name
    if any(ch.isdigit() for ch in first) or sum(ch.isupper() for ch in first) >= 2:
        out.append(first)
    return [a.lower() for a in dict.fromkeys(out) if a]


def _first_named(answer: str, entities: Sequence[str]) -> str | None:
    """The entity an answer names first.

    A restated list (three or more of the names in the question's order, joined by commas,
    "or", "and") names none.
    """
    low = answer.lower()
    forms = sorted(((a, e) for e in entities for a in aliases(e)), key=lambda t: -len(t[0]))
    entity = dict(forms)
    one = rf"(?<![\w-])(?:{'|'.join(re.escape(a) for a, _ in forms)})(?![\w-])"
    hits = list(re.finditer(one, low))
    order = list(entities)
    i = 0
    while i < len(hits):
        j = i
        while (
            j + 1 < len(hits)
            and _JOIN.fullmatch(low[hits[j].end() : hits[j + 1].start()])
            and order.index(entity[hits[j + 1].group(0)]) > order.index(entity[hits[j].group(0)])
        ):
            j += 1
        if j - i < 2:  # not a restated list
            return entity[hits[i].group(0)]
        i = j + 1
    return None


def _names_first_of_two(answer: str, winner: str, loser: str) -> bool:
    """`winner` named before (or without) `loser`; a restated pair ("A or B") names neither."""
    names = "|".join(re.escape(n.lower()) for n in (winner, loser))
    pair = rf"(?:{names})\s*,?\s*(?:or|and|vs\.?|versus)\s*(?:{names})"
    low = re.sub(pair, " ", answer.lower())
    win, lose = low.find(winner.lower()), low.find(loser.lower())
    return win >= 0 and (lose < 0 or win < lose)


def _names(answer: str, entity: str) -> bool:
    low = answer.lower()
    return any(re.search(rf"(?<![\w-]){re.escape(a)}(?![\w-])", low) for a in aliases(entity))


def is_parrot(answer: str) -> bool:
    """An answer that echoes the prompt or raw KB lines instead of answering."""
    return any(marker in answer for marker in _PARROT)


def score(question: EvalQuestion, answer: str) -> bool:
    """Whether `answer` states everything `question`'s gold answer holds (and does not parrot)."""
    if not answer.strip() or is_parrot(answer):
        return False
    if question.entity:
        others = [e for e in question.entities if e != question.entity]
        if len(others) == 1:
            if not _names_first_of_two(answer, question.entity, others[0]):
                return False
        elif others:
            if _first_named(answer, question.entities) != question.entity:
                return False
        elif not _names(answer, question.entity):
            return False
    stated = numbers_in(without_tags(answer))  # a tag's hex id holds digits, not figures
    if not all(any(abs(n - gold) < 1e-9 for n in stated) for gold in question.numbers):
        return False
    low = answer.lower()
    return all(s.lower() in low for s in question.strings)


def bootstrap_diff(
    a: Sequence[float], b: Sequence[float], rounds: int = 2000
) -> tuple[float, float]:
    """Paired bootstrap 95% CI of mean(a) - mean(b) over the same questions (seeded)."""
    rng = random.Random(0)
    n = len(a)
    if n == 0:
        return 0.0, 0.0
    diffs = []
    for _ in range(rounds):
        idx = [rng.randrange(n) for _ in range(n)]
        diffs.append(sum(a[i] - b[i] for i in idx) / n)
    diffs.sort()
    return diffs[int(0.025 * rounds)], diffs[int(0.975 * rounds) - 1]
