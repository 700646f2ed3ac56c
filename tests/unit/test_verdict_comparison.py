"""The highest or lowest figure of supported claims leads a "which is highest" verdict."""

from __future__ import annotations

import pytest

from collective.verdict.comparison import asked, extreme, off_question
from collective.verdict.support import Claim

SOURCES = {"a": "6061-T6", "b": "316", "c": "C110", "d": "C110", "e": "PLA", "f": "PA12 nylon",
           "g": "TPE 85A", "h": "hard maple", "i": "white oak", "j": "PEEK"}  # fmt: skip


def _claim(text: str, cited: str, status: str = "supported") -> Claim:
    return Claim(f"{text} [KB#{cited}]", (cited,), status, "")  # type: ignore[arg-type]


AL = _claim("6061-T6 aluminium has a density of about 2.70 g/cm3 and melts over 582-652 °C.", "a")
STEEL = _claim("316 stainless steel has a density of about 8.00 g/cm3.", "b")
COPPER = _claim("C110 copper has a density of about 8960 kg/m3.", "c")


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
    ],
)
def test_asked_reads_the_direction_a_question_asks_for(question: str, direction: str | None):
    assert asked(question) == direction


def test_the_highest_figure_across_answers_and_units_leads():
    # a judge listed aluminium and steel; a member read copper's chunk, in kg/m3
    found = extreme("Which of these metals is densest: 6061-T6, 316 or C110?", [AL, STEEL, COPPER],
                    SOURCES)  # fmt: skip
    assert found is not None and found.claim is COPPER and found.compared == 3
    assert found.line.startswith("Highest of 3 compared: C110 copper has a density")
    lowest = extreme("Which is the lightest of them?", [AL, STEEL, COPPER], SOURCES)
    assert lowest is not None and lowest.claim is AL


def test_the_kind_the_question_names_is_compared_not_another():
    hot = _claim("316 stainless steel melts over 1375-1400 °C.", "b")
    # by melting range aluminium is lowest, by density too: ask for the highest melting range
    found = extreme("Which has the highest melting temperature, 6061-T6 or 316?", [AL, hot],
                    SOURCES)  # fmt: skip
    assert found is not None and found.claim is hot
    # density is named: aluminium's figure is compared with steel's density, not its melting
    found = extreme("Which is denser, 6061-T6 or 316?", [AL, hot, STEEL], SOURCES)
    assert found is not None and found.claim is STEEL


@pytest.mark.parametrize(
    "claims",
    [
        [AL],  # one thing: nothing to compare
        [AL, _claim("316 stainless steel has a density of about 8.00 g/cm3.", "b", "dropped")],
        [_claim("C110 copper is dense at 8.96 g/cm3.", "c"),
         _claim("C110 copper weighs 8.9 g/cm3 in bar stock.", "d")],  # one document
        [AL, _claim("C110 copper has a density of about 2.70 g/cm3.", "c")],  # a tie
    ],
)  # fmt: skip
def test_no_lead_where_the_comparison_is_not_plain(claims: list[Claim]):
    assert extreme("Which is the densest: 6061-T6, 316 or C110?", claims, SOURCES) is None


def test_two_figures_of_one_document_are_not_two_things():
    # PLA's nozzle and its softening point: "the highest temperature PLA takes" is no choice
    nozzle = _claim("PLA prints at a nozzle temperature of 190-220 °C.", "e")
    soft = _claim("PLA softens near its glass transition of about 60 °C.", "e")
    assert extreme("Which temperature is highest for PLA?", [nozzle, soft], SOURCES) is None


def test_only_the_things_the_question_names_are_compared():
    # measured: retrieval showed PA12's chunk for a question that did not name PA12
    pa12 = _claim(
        "- PA12 nylon > Print temperatures: PA12 nylon prints at a nozzle temperature of "
        "240-270 °C.",
        "f",
    )
    tpe = _claim("- TPE 85A > Print temperatures: TPE 85A prints at a nozzle temperature of "
                 "210-230 °C.", "g")  # fmt: skip
    pla = _claim("PLA prints at a nozzle temperature of 190-220 °C.", "e")
    question = "Which filament needs the highest nozzle temperature: PLA, TPE 85A or PEEK?"
    found = extreme(question, [pa12, tpe, pla], SOURCES)
    assert found is not None and found.claim is tpe
    # what it compared, of how many the question names; no bullet or heading carried over
    assert found.line == (
        "Highest of 2 compared (3 asked about): TPE 85A prints at a nozzle temperature of "
        "210-230 °C. [KB#g]"
    )


def test_the_figure_after_the_questions_words_is_the_one_compared():
    pla = _claim("PLA prints at a nozzle temperature of 190-220 °C with the bed at 50-60 °C.", "e")
    tpe = _claim("TPE 85A prints at a nozzle temperature of 210-230 °C with the bed at 30-50 °C.",
                 "g")  # fmt: skip
    assert extreme("Which of PLA or TPE 85A has the lower nozzle temperature?", [pla, tpe],
                   SOURCES).claim is pla  # type: ignore[union-attr]  # fmt: skip
    assert extreme("Which of PLA or TPE 85A has the lower bed temperature?", [pla, tpe],
                   SOURCES).claim is tpe  # type: ignore[union-attr]  # fmt: skip


def test_the_kind_the_question_leads_up_to_is_compared():
    # density and Janka hardness in one sentence: the question's words pick the hardness
    maple = _claim("Hard maple has a density of about 0.70 g/cm3; Janka hardness about 1450 lbf.",
                   "h")  # fmt: skip
    oak = _claim("White oak has a density of about 0.75 g/cm3; Janka hardness about 1360 lbf.",
                 "i")  # fmt: skip
    found = extreme("Which has the highest Janka hardness: white oak or hard maple?", [oak, maple],
                    SOURCES)  # fmt: skip
    assert found is not None and found.claim is maple
    found = extreme("Which is denser, white oak or hard maple?", [oak, maple], SOURCES)
    assert found is not None and found.claim is oak


def test_a_claim_that_does_not_name_its_thing_is_led_by_the_things_name():
    # measured in the eval: a member wrote "It has a density of about 8.50 g/cm3"
    it = _claim("It has a density of about 8.96 g/cm3.", "c")
    found = extreme("Which is densest: 6061-T6, 316 or C110?", [AL, STEEL, it], SOURCES)
    assert found is not None
    assert found.line == "Highest of 3 compared: C110: It has a density of about 8.96 g/cm3. [KB#c]"


def test_a_models_framing_before_the_chunks_sentence_is_left_out_of_the_lead():
    # measured in the eval: a sample framed the highest as "the next highest", then copied
    # the chunk's sentence; the lead said "Highest of 2 compared: ... the next highest ..."
    framed = _claim("Hard maple has the next highest Janka hardness: Hard maple has a density "
                    "of about 0.70 g/cm3; Janka hardness about 1450 lbf.", "h")  # fmt: skip
    oak = _claim("White oak has a density of about 0.75 g/cm3; Janka hardness about 1360 lbf.",
                 "i")  # fmt: skip
    found = extreme("Which has the highest Janka hardness: white oak or hard maple?",
                    [oak, framed], SOURCES)  # fmt: skip
    assert found is not None and found.claim is framed
    assert found.line == (
        "Highest of 2 compared: Hard maple has a density of about 0.70 g/cm3; Janka hardness "
        "about 1450 lbf. [KB#h]"
    )


def test_off_question_claims_cite_none_of_the_things_the_question_names():
    both = _claim("C110 copper is denser than 6061-T6 aluminium.", "c")
    both = Claim(both.text, ("c", "a"), "supported", "")  # type: ignore[arg-type]
    claims = [AL, STEEL, COPPER, both]
    question = "Which is denser, 316 or C110?"
    assert off_question(question, claims, SOURCES) == [AL]
    assert off_question("Which metal is densest?", claims, SOURCES) == []  # names none of them
    # a choice that ranks nothing may be answered with a third thing
    assert off_question("Should I machine 316 or C110 for this part?", claims, SOURCES) == []
