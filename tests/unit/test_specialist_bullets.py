"""A member whose answer is bullets alone is asked once more, in other words.

The 1.5B copies the answer format's quoted "- " in a loop to its cap on some prompts, at every
temperature (12 of 104 samples on the held-out questions, bench/README.md): such a sample gives
the vote nothing. The scripted member loops on the format as the real one did.
"""

from __future__ import annotations

from collective.graph import build_graph
from collective.nodes.specialist import ASKED_AGAIN
from collective.prompts import specialist as prompt
from tests.fakes import ScriptedBackend
from tests.unit.test_graph_council import context

LOOP = "- " * 60
ANSWER = "ASA keeps its shape to about 95 C [KB#mem_asa]."


def member(looping_again: bool = False):
    def reply(messages) -> str:
        asked = messages[-1]["content"]
        if prompt.ANSWER_AGAIN in asked:
            return LOOP if looping_again else ANSWER
        assert prompt.ANSWER in asked
        return LOOP

    return reply


async def ask(spec: ScriptedBackend) -> dict:
    ctx = context(specialists=[spec], k=2, judge=ScriptedBackend("judge", ANSWER))
    return await build_graph().ainvoke({"question": "Which filament for a hot car?"}, context=ctx)


async def test_a_member_that_loops_on_bullets_is_asked_again_in_other_words() -> None:
    spec = ScriptedBackend("spec", member())
    out = await ask(spec)
    assert [p["text"] for p in out["proposals"]] == [ANSWER, ANSWER]
    assert all(p["citations"] == ["mem_asa"] for p in out["proposals"])
    asked = [m[-1]["content"] for m in spec.calls]
    # first in the format every member gets, then once more for those that looped
    assert prompt.ANSWER in asked[0] and any(prompt.ANSWER_AGAIN in a for a in asked[1:])
    nodes = [b["node"] for b in out["budgets"]]
    assert nodes.count("specialist-1") + nodes.count("specialist-2") == len(spec.calls)
    # the call that asked again says so, and why
    again = [n for b in out["budgets"] for n in b["notes"] if n.startswith(ASKED_AGAIN)]
    assert again == [f"{ASKED_AGAIN}: the answer was bullets alone"] * 2


async def test_a_member_that_loops_again_keeps_its_answer_and_is_asked_no_more() -> None:
    spec = ScriptedBackend("spec", member(looping_again=True))
    out = await ask(spec)
    assert len(spec.calls) == 4  # two members, each asked twice
    assert all(p["text"].startswith("- -") for p in out["proposals"])


async def test_a_member_that_answers_is_asked_once() -> None:
    spec = ScriptedBackend("spec", ANSWER)
    out = await ask(spec)
    assert len(spec.calls) == 2
    assert not any(n.startswith(ASKED_AGAIN) for b in out["budgets"] for n in b["notes"])
    assert [p["text"] for p in out["proposals"]] == [ANSWER, ANSWER]
