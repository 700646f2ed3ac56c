"""Which chunk of the thing asked leads the verdict, on a camping-gear KB of my own.

The one more answers lead with than the judge's (`agreed_lead`). Two chunks of one thing may
both be true of it; which answers the question is what the answers vote on (held-out: "What
nozzle does PETG-CF need?" led with its nozzle temperature, the judge's line, where both samples
said "needs a hardened or ruby nozzle", uncited). One call has only its own vote: the judge's
lead stands. Where no answer answers, the chunk of the thing asked that retrieval ranks first by
a wide margin does (`first_of_thing`; held-out: "Why won't glue stick to my teak?" said the KB
does not answer, its finishing chunk first by 0.27).
"""

from __future__ import annotations

import functools

import pytest

from collective.kb.names import chunk_vocabulary
from collective.kb.store import Chunk
from collective.verdict.agreement import Asked, agreed_lead, check_answer
from collective.verdict.lines import first_of_thing, ordered, supporting_lines
from collective.verdict.support import shown_whole

CHUNKS = [
    Chunk(f"mem_{key}", text, f"camping/{heading.split(' > ')[0]}.md", heading=heading)
    for key, heading, text in [
        ("bag_warm", "down sleeping bag > Warmth",
         "A down sleeping bag is warm for its weight, rated to about -5 °C."),
        ("bag_wet", "down sleeping bag > Damp",
         "Wet down loses its loft and stops insulating."),
        ("bag_store", "down sleeping bag > Storage",
         "Store a down sleeping bag loose in a large sack, never compressed."),
        ("bag_pack", "down sleeping bag > Packing", "A down sleeping bag packs to about 2 litres."),
        ("stove_cold", "canister stove > Cold",
         "Canister stoves lose pressure in freezing weather and burn weakly."),
        ("stove_fuel", "canister stove > Fuel", "A canister stove burns a butane-propane mix."),
        ("stove_boil", "canister stove > Boiling",
         "A canister stove boils a litre of water in about 4 minutes."),
        ("stove_wind", "canister stove > Wind", "Canister stoves need a windscreen in gusty air."),
        ("merino_odour", "merino base layer > Odour", "Merino wool resists odour for days."),
        ("merino_wash", "merino base layer > Washing",
         "Wash merino base layers cold and dry them flat; heat shrinks them."),
        ("merino_damp", "merino base layer > Damp", "Merino stays warm when damp."),
    ]
]  # fmt: skip
SHOWN = shown_whole({c.id: c for c in CHUNKS})


@functools.cache
def vocabulary():
    return chunk_vocabulary(CHUNKS)


def lead(question: str, judge: str, members: list[str], confidence: float | None = None):
    v = vocabulary()
    asked = Asked.read(question, v, SHOWN.values())
    stands = check_answer("judge", judge, SHOWN, vocabulary=v)
    others = [check_answer(f"specialist-{n}", m, SHOWN, vocabulary=v, confidence=confidence)
              for n, m in enumerate(members, 1)]  # fmt: skip
    return agreed_lead(asked, stands, [stands, *others], SHOWN, v)


WARM = "A down sleeping bag is warm for its weight [KB#mem_bag_warm]."


@pytest.mark.parametrize(
    ("question", "judge", "member", "agreed"),
    [
        # the samples lead with another chunk of the thing: cited, or in words it holds
        ("Can I use a down sleeping bag in wet weather?", WARM,
         "Down stops insulating once it is wet, as its loft collapses.", "bag_wet"),
        ("How should I store my down sleeping bag?",
         "A down sleeping bag packs to about 2 litres [KB#mem_bag_pack].",
         "Store it loose in a large sack [KB#mem_bag_store].", "bag_store"),
        ("Does a canister stove work in freezing weather?",
         "A canister stove burns a butane-propane mix [KB#mem_stove_fuel].",
         "It loses pressure and burns weakly in the cold.", "stove_cold"),
        ("Do I need a windscreen for my canister stove?",
         "A canister stove boils a litre of water in about 4 minutes [KB#mem_stove_boil].",
         "Yes, in gusty air it needs one.", "stove_wind"),
        ("How do I wash a merino base layer?",
         "Merino wool resists odour for days [KB#mem_merino_odour].",
         "Wash it cold and dry it flat, because heat shrinks it.", "merino_wash"),
        # the same chunk as the judge's, an echo of the question, a false first line, another
        # thing's chunk, a first line that holds too little: the judge's lead stands
        ("Can I use a down sleeping bag in wet weather?", WARM,
         "A down sleeping bag is warm for its weight [KB#mem_bag_warm].", None),
        ("Can I use a down sleeping bag in wet weather?", WARM,
         "Yes, you can use a down sleeping bag in wet weather.", None),
        ("How small does a down sleeping bag pack?", WARM,
         "A down sleeping bag packs to about 9 litres [KB#mem_bag_pack].", None),
        ("Can I use a down sleeping bag in wet weather?", WARM,
         "Merino stays warm when damp [KB#mem_merino_damp].", None),
        ("Can I use a down sleeping bag in wet weather?", WARM, "It is fine when wet.", None),
        # a question about two things: the answers choose between things, not chunks
        ("Which stays warmer when damp, a down sleeping bag or a merino base layer?", WARM,
         "Down stops insulating once it is wet, as its loft collapses.", None),
    ],
)  # fmt: skip
def test_the_chunk_more_answers_lead_with_leads(question, judge, member, agreed) -> None:
    expected = f"mem_{agreed}" if agreed else None
    assert lead(question, judge, [member, member]) == expected


def test_one_call_or_a_tie_keeps_the_judges_lead() -> None:
    wet = "Down stops insulating once it is wet, as its loft collapses."
    question = "Can I use a down sleeping bag in wet weather?"
    assert lead(question, WARM, []) is None
    assert lead(question, WARM, [wet]) is None  # one against one
    store = "Store it loose in a large sack [KB#mem_bag_store]."
    assert lead(question, WARM, [wet, store]) is None  # one each


def test_the_vote_is_weighed_by_confidence() -> None:
    wet = "Down stops insulating once it is wet, as its loft collapses."
    question = "Can I use a down sleeping bag in wet weather?"
    assert lead(question, WARM, [wet, wet], confidence=0.4) is None  # 0.8 against 1
    assert lead(question, WARM, [wet, wet], confidence=0.9) == "mem_bag_wet"


def test_the_agreed_chunk_s_line_leads_the_verdict() -> None:
    v = vocabulary()
    asked = Asked.read("Can I use a down sleeping bag in wet weather?", v, SHOWN.values())
    scores = {i: 0.8 for i in SHOWN} | {"mem_bag_warm": 0.85}
    lines = supporting_lines(asked, SHOWN, scores, ["mem_bag_warm"], v, said=WARM,
                             agreed="mem_bag_wet")  # fmt: skip
    assert lines[0] == "Wet down loses its loft and stops insulating. [KB#mem_bag_wet]"
    verdict = ordered(asked, WARM, lines, scores, v, agreed="mem_bag_wet")
    assert verdict[:2] == [lines[0], WARM]
    assert ordered(asked, WARM, lines, scores, v)[0] == WARM  # no agreement: the judge's first


@pytest.mark.parametrize(
    ("question", "first", "score", "next_score", "expected"),
    [
        ("Why does my canister stove burn weakly in winter?", "stove_cold", 0.9, 0.6, True),
        ("How do I store a down sleeping bag?", "bag_store", 0.85, 0.7, True),
        ("Does a merino base layer shrink in the dryer?", "merino_wash", 0.8, 0.6, True),
        ("Can a down sleeping bag get wet?", "bag_wet", 0.95, 0.6, True),
        ("Can a down sleeping bag get wet?", "bag_wet", 0.8, 0.7, True),  # 0.1 ahead
        ("Can a down sleeping bag get wet?", "bag_wet", 0.7, 0.65, False),  # close: unsure
        ("How do I store a down sleeping bag?", "bag_store", 0.62, 0.6, False),
        # another thing's chunk first, two things asked, no thing named
        ("Can a down sleeping bag get wet?", "merino_damp", 0.95, 0.6, False),
        ("Which stays warmer when damp, a down sleeping bag or a merino base layer?",
         "merino_damp", 0.95, 0.6, False),
        ("What should I pack for a cold night outside?", "bag_warm", 0.95, 0.6, False),
    ],
)  # fmt: skip
def test_where_no_answer_answers_retrievals_clear_first_of_the_thing_does(
    question, first, score, next_score, expected
) -> None:
    v = vocabulary()
    asked = Asked.read(question, v, SHOWN.values())
    scores = {i: next_score - 0.05 for i in SHOWN} | {"mem_bag_pack": next_score}
    scores[f"mem_{first}"] = score
    assert first_of_thing(asked, SHOWN, scores, v) == (f"mem_{first}" if expected else None)


@pytest.mark.parametrize(
    ("question", "direct", "other", "quoted"),
    [
        # the verdict speaks of what is asked: a line of a thing asked about that speaks of none
        # of it is left out, whichever of the things it is (held-out: "Which metal is easiest to
        # machine: C360 brass, C110 copper or 304?" quoted C360's cost and welding lines)
        ("Which resists odour better, a merino base layer or a down sleeping bag?",
         "merino_odour", "bag_warm", False),
        ("Which resists odour better, a merino base layer or a down sleeping bag?",
         "merino_odour", "merino_wash", False),
        ("Does a canister stove or a down sleeping bag cope with freezing weather?",
         "stove_cold", "stove_fuel", False),
        ("Does a canister stove or a down sleeping bag cope with freezing weather?",
         "stove_cold", "bag_store", False),
        ("Should I wash a merino base layer or a down sleeping bag cold?",
         "merino_wash", "merino_odour", False),
        # a line that speaks of it, in its words or its section's name, stays
        ("Which handles damp better, a merino base layer or a down sleeping bag?",
         "merino_damp", "bag_wet", True),
        ("Which loses its loft or its pressure in the cold, a down sleeping bag or a canister "
         "stove?", "stove_cold", "bag_wet", True),
        ("Which is warm when damp, a merino base layer or a down sleeping bag?",
         "merino_damp", "bag_warm", True),
        # the verdict does not speak of it yet, or the question names no thing: as cited
        ("Which is safer in gusty weather, a canister stove or a down sleeping bag?",
         "bag_store", "stove_fuel", True),
        ("What should I bring for a cold night outside?", "bag_warm", "stove_fuel", True),
    ],
)  # fmt: skip
def test_a_line_of_a_thing_asked_that_speaks_of_nothing_asked_is_left_out(
    question, direct, other, quoted
) -> None:
    v = vocabulary()
    asked = Asked.read(question, v, SHOWN.values())
    said = f"{SHOWN[f'mem_{direct}'].text} [KB#mem_{direct}]"
    scores = {i: 0.5 for i in SHOWN} | {f"mem_{direct}": 0.8, f"mem_{other}": 0.75}
    cited = [f"mem_{direct}", f"mem_{other}"]
    lines = supporting_lines(asked, SHOWN, scores, cited, v, said=said, most=5)
    assert (f"[KB#mem_{other}]" in " ".join(lines)) is quoted, lines
