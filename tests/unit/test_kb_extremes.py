"""The highest or lowest figure of supported claims leads a "which is highest" verdict."""

from __future__ import annotations

import pytest

from collective.kb.extremes import asked, extreme
from collective.kb.support import Claim

SOURCES = {"a": "al.md", "b": "steel.md", "c": "copper.md", "d": "copper.md", "e": "pla.md"}


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
    assert found.line.startswith("Highest: C110 copper has a density")
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
