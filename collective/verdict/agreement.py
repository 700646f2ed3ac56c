"""Answers read against the KB: each one's claims checked, what they agree on, which stands.

A small judge aggregates badly (discussion lowered small models' accuracy; selecting the
best-supported answer won: SLM-MUX, arXiv 2510.05077). So the judge writes its own answer from
the KB, as one call of its model would, and `select` rules between it and the members' answers
by the claim check: the judge's answer stands while a claim of it is supported; otherwise the
supported answer the most members agree on. The members can back the judge's answer or stand in
for an unsupported one, never displace a supported one: the verdict is never worse than the
judge's model alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from collective.verdict.support import (
    Claim,
    Entail,
    Shown,
    answer_entities,
    check_claims,
    revise,
)

__all__ = ["NO_ANSWER", "Checked", "agreement", "check_answer", "select"]

NO_ANSWER = "The knowledge base does not answer this question: no chunk shown to the council \
supports the claims it made."


@dataclass(frozen=True)
class Checked:
    """One answer after the claim check."""

    who: str
    text: str
    """The answer with its claims retagged or dropped as the check found."""
    claims: tuple[Claim, ...]
    answer: Mapping[str, str]
    """The entities its first sentence names (key: as written): what it answers."""

    @property
    def supported(self) -> int:
        """How many of its claims a chunk supports."""
        return sum(c.supported for c in self.claims)

    @property
    def standing(self) -> int:
        """How many of its claims stand (all but the dropped)."""
        return sum(c.status != "dropped" for c in self.claims)


def check_answer(
    who: str,
    text: str,
    shown: Mapping[str, Shown],
    entail: Entail | None = None,
    names: Iterable[str] = (),
    claims: Sequence[Claim] | None = None,
) -> Checked:
    """`text` checked against the chunks `shown`, its claims retagged and dropped as found.

    Its `claims` are checked by `check_claims` unless given.
    """
    names = list(names)
    if claims is None:
        claims = check_claims(text, shown, entail, names)
    revised = revise(text, claims)
    first = next((line for line in revised.splitlines() if line.strip(" -*•")), "")
    return Checked(who, revised, tuple(claims), answer_entities(first, shown, names))


def agreement(answers: Sequence[Checked]) -> dict[str, list[str]]:
    """Per entity an answer names, who names it (those named by two or more first)."""
    named: dict[str, list[str]] = {}
    for answer in answers:
        if answer.supported:
            for key in answer.answer:
                named.setdefault(key, []).append(answer.who)
    return dict(sorted(named.items(), key=lambda item: -len(item[1])))


def select(
    verdict: Checked, members: Sequence[Checked], ranks: Mapping[str, float] | None = None
) -> tuple[Checked, str]:
    """The answer that stands, and why.

    The judge's verdict stands while a claim of it is supported (or it makes none). Otherwise
    the member answer most agreed on, then best supported, then best ranked by the peer review
    (`ranks`: mean rank, lower is better) stands; with none supported, the verdict stands while
    a claim of it does (uncited), else `NO_ANSWER`: every claim dropped.
    """
    if verdict.supported or (not verdict.claims and verdict.text.strip()):
        return verdict, ""
    agree = agreement(members)
    backers = {who for who_list in agree.values() for who in who_list}
    ranks = ranks or {}

    def rank(member: Checked) -> tuple[int, int, int, float]:
        agreed = max((len(w) for k, w in agree.items() if k in member.answer), default=0)
        return (agreed, member.supported, -len(member.claims), -ranks.get(member.who, 0.0))

    best = max((m for m in members if m.supported and m.who in backers), key=rank, default=None)
    if best is not None:
        return best, (
            f"the judge's own answer had no supported claim; {best.who}'s answer "
            f"({best.supported} supported) stands instead"
        )
    if verdict.standing and verdict.text.strip():  # uncited claims, no false ones
        return verdict, ""
    return (
        Checked(verdict.who, NO_ANSWER, verdict.claims, {}),
        "no answer had a supported claim: the verdict says the knowledge base does not answer",
    )
