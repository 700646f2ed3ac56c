"""The `vote` arm's rule: a vote on reduced answers, each weighed by its model's confidence."""

from __future__ import annotations

import pytest

from collective.graph.state import Proposal
from collective.kb.store import Chunk
from collective.modes import confident_vote
from collective.verdict.agreement import reduced_answer


def _p(member: str, text: str = "an answer", mean: float | None = None) -> Proposal:
    confidence = None if mean is None else {"mean": mean, "lowest": mean, "tokens": 9, "window": 12}
    return Proposal(member=member, model="m", text=text, citations=[], unknown_citations=[],
                    error=None, confidence=confidence)  # fmt: skip


# (answers as (member, mean), each member's reduced answer, the member that must stand)
CASES = [
    # two agree against one: the pair wins even though the lone answer is surer
    ([("a", -0.5), ("b", -0.5), ("c", -0.1)], {"a": "asa", "b": "asa", "c": "pla"}, "a"),
    # one very sure answer outweighs two unsure ones (e^-0.05 > 2 e^-3)
    ([("a", -3.0), ("b", -3.0), ("c", -0.05)], {"a": "asa", "b": "asa", "c": "pla"}, "c"),
    # within the elected thing, the surest answer stands
    ([("a", -0.9), ("b", -0.2), ("c", -0.1)], {"a": "asa", "b": "asa", "c": "pla"}, "b"),
    # no confidence anywhere: a plain vote
    ([("a", None), ("b", None), ("c", None)], {"a": "pla", "b": "asa", "c": "asa"}, "b"),
    # one answer without confidence makes every weight 1 (no mixing of scales)
    ([("a", None), ("b", -0.01), ("c", -3.0)], {"a": "asa", "b": "pla", "c": "asa"}, "a"),
    # answers naming nothing vote only for themselves
    ([("a", -0.4), ("b", -0.4), ("c", -0.6)], {"a": None, "b": None, "c": "asa"}, "a"),
    # ties go to the first (the judge's own answer comes first)
    ([("judge", -0.3), ("b", -0.3)], {"judge": "asa", "b": "pla"}, "judge"),
    # a single candidate stands
    ([("judge", -2.0)], {"judge": None}, "judge"),
    # three different things: the surest
    ([("a", -0.7), ("b", -0.2), ("c", -0.4)], {"a": "asa", "b": "petg", "c": "pla"}, "b"),
    # a member missing from the reduced map votes alone
    ([("a", -0.2), ("b", -0.3), ("c", -0.3)], {"b": "asa", "c": "asa"}, "b"),
]


@pytest.mark.parametrize(("answers", "things", "stands"), CASES)
def test_confident_vote(answers, things, stands) -> None:
    proposals = [_p(member, mean=mean) for member, mean in answers]
    assert confident_vote(proposals, things)["member"] == stands


def test_an_empty_answer_does_not_vote() -> None:
    proposals = [_p("a", "", -0.01), _p("b", "PLA", -2.0)]
    assert confident_vote(proposals, {"a": "asa", "b": "pla"})["member"] == "b"


CHUNKS = {
    "asa": Chunk("asa", "ASA keeps its shape to about 95 C.", "asa.md", heading="ASA"),
    "pla": Chunk("pla", "PLA softens near 55 C.", "pla.md", heading="PLA"),
}


@pytest.mark.parametrize(
    ("text", "thing"),
    [
        ("ASA keeps its shape in a hot car [KB#asa].", "asa"),
        ("Use PLA for the bracket.", "pla"),
        ("- ASA, because it softens only near 95 C", "asa"),
        ("\n\nPLA\nASA is the other choice", "pla"),  # the first line that says something
        ("Nylon is best.", None),  # a thing the KB has no name for
    ],
)
def test_reduced_answer_is_the_kb_name_the_first_line_answers_with(text, thing) -> None:
    got = reduced_answer(text, CHUNKS)
    assert (got.lower() if got else None) == thing
