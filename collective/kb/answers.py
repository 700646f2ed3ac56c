"""Answers read against the KB: each one's claims checked, what they agree on, which stands.

A small judge aggregates badly (discussion lowered small models' accuracy; selecting the
best-supported answer won: SLM-MUX, arXiv 2510.05077). So the judge is shown the members'
answers as the claim check left them, only their supported claims and which answer they agree
on (`digest`), and writes its own answer from the KB; then `select` keeps the judge's verdict
unless it has nothing supported left and a member's answer has: the members can support or add
to the judge's answer, never displace a better-supported one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from collective.kb.citations import neutralise
from collective.kb.support import (
    Claim,
    Entail,
    Shown,
    answer_entities,
    check_claims,
    revise,
)

__all__ = ["Checked", "check_answer", "digest", "select"]

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
    note: str = ""
    """Said of it beside its name (a partial answer)."""

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
    note: str = "",
) -> Checked:
    """`text` checked against the chunks `shown`, its claims retagged and dropped as found.

    Its `claims` are checked by `check_claims` unless given.
    """
    names = list(names)
    if claims is None:
        claims = check_claims(text, shown, entail, names)
    revised = revise(text, claims)
    first = next((line for line in revised.splitlines() if line.strip(" -*•")), "")
    return Checked(who, revised, tuple(claims), answer_entities(first, shown, names), note)


def _agreement(answers: Sequence[Checked]) -> dict[str, list[str]]:
    """Per entity an answer names, who names it (those named by two or more first)."""
    named: dict[str, list[str]] = {}
    for answer in answers:
        if answer.supported:
            for key in answer.answer:
                named.setdefault(key, []).append(answer.who)
    return dict(sorted(named.items(), key=lambda item: -len(item[1])))


def digest(members: Sequence[Checked]) -> str:
    """The members' answers for the judge: agreement, then each one's supported claims."""
    if not members:
        return ""
    spelled = {k: v for m in members for k, v in m.answer.items()}
    agree = _agreement(members)
    shared = [(k, who) for k, who in agree.items() if len(who) > 1]
    if shared:
        lines = [
            "Agreement: "
            + "; ".join(f"{', '.join(who)} name {spelled[k]}" for k, who in shared)
            + "."
        ]
    elif agree:
        lines = ["Agreement: none; each names another answer."]
    else:
        lines = ["Agreement: no answer has a supported claim."]
    for member in members:
        claims = [c for c in member.claims if c.supported]
        lines.append(
            f"### {member.who}{member.note}: {member.supported} of {len(member.claims)} claims "
            "supported"
        )
        # model text: only the tags of the chunks it was checked against stay tags
        lines += [f"- {neutralise(c.text, c.cited).strip(' -*•')}" for c in claims]
        lines += [] if claims else ["(nothing supported)"]
    return "\n".join(lines)


def select(verdict: Checked, members: Sequence[Checked]) -> tuple[Checked, str]:
    """The answer that stands, and why.

    The judge's verdict stands while a claim of it is supported (or it makes none). Otherwise
    the member answer most agreed on, then best supported, stands; with none supported, the
    verdict stands while a claim of it does (uncited), else `NO_ANSWER`: every claim dropped.
    """
    if verdict.supported or (not verdict.claims and verdict.text.strip()):
        return verdict, ""
    agree = _agreement(members)
    backers = {who for who_list in agree.values() for who in who_list}

    def rank(member: Checked) -> tuple[int, int, int]:
        agreed = max((len(w) for k, w in agree.items() if k in member.answer), default=0)
        return (agreed, member.supported, -len(member.claims))

    best = max((m for m in members if m.supported and m.who in backers), key=rank, default=None)
    if best is not None:
        return best, (
            f"the judge's verdict had no supported claim; {best.who}'s answer "
            f"({best.supported} supported) stands instead"
        )
    if verdict.standing and verdict.text.strip():  # uncited claims, no false ones
        return verdict, ""
    return (
        Checked(verdict.who, NO_ANSWER, verdict.claims, {}),
        "no answer had a supported claim: the verdict says the knowledge base does not answer",
    )
