"""The claim check reads what a cited claim means: quantities with units, entities, negation.

Each false claim here passed the old check (numbers and names anywhere in the chunk), each true
one failed it; the chunks are shaped like the demo and eval KBs'.
"""

from __future__ import annotations

import pytest

from collective.kb.citations import format_chunk
from collective.kb.quantities import quantities, same_quantity
from collective.kb.store import Chunk
from collective.verdict.support import as_shown, check_claims, revise, shown_whole, support_share

PLA = Chunk(
    "mem_pla",
    "PLA softens near its glass transition of about 55-60 °C, so parts sag in hot cars. "
    "Dry it at 45-50 °C for 4-6 hours if it strings. Unlike ASA, it is not UV stable.",
    "filament/pla.md",
    heading="PLA > Heat",
)
ABS = Chunk(
    "mem_abs",
    "ABS is tough, impact resistant, and handles heat to around 95-100 °C. It is used for "
    "automotive interior parts, housings and tool handles.",
    "filament/abs.md",
    heading="ABS and ASA > ABS properties",
)
NYLON = Chunk(
    "mem_nylon",
    "Nylon is tough, wear resistant and has low friction, which suits gears, hinges and "
    "bushings. It is the most hygroscopic common filament.",
    "filament/nylon.md",
    heading="Nylon > Engineering",
)
ASA = Chunk(
    "mem_asa",
    "ASA warps somewhat less than ABS but still needs a draft-free warm chamber. Nozzle 240-260 "
    "°C, bed 90-110 °C.",
    "filament/asa.md",
    heading="ABS and ASA > Printing ASA",
)
PETG = Chunk(
    "mem_petg",
    "PETG prints at a nozzle temperature of 230-250 °C with the bed at 70-85 °C. A 0.4 mm "
    "nozzle at 40 mm/s works well.",
    "filament/petg.md",
    heading="PETG > Print temperatures",
)
TPU = Chunk(
    "mem_tpu",
    "TPU stays flexible from -50 to 120 °C and has a density of 1.2 g/cm3.",
    "filament/tpu.md",
    heading="TPU > Properties",
)
SHOWN = shown_whole({c.id: c for c in (PLA, ABS, NYLON, ASA, PETG, TPU)})


def status(claim: str) -> str:
    (checked,) = check_claims(claim, SHOWN)
    return checked.status


@pytest.mark.parametrize(
    "claim",
    [
        # an entity swapped for one the chunk names in passing
        "ASA softens near 55-60 °C [KB#mem_pla].",
        # the nylon paragraph under an ABS tag: ABS is named there, nothing else is its
        "ABS is tough, wear resistant and has low friction, which suits gears [KB#mem_abs].",
        "ABS is the most hygroscopic common filament [KB#mem_abs].",
        # numbers glued to their units, changed
        "Use a 0.8mm nozzle for PETG [KB#mem_petg].",
        "Print PETG at 60mm/s [KB#mem_petg].",
        # a sign dropped, a decimal comma read as another number
        "TPU stays flexible from 50 to 120 °C [KB#mem_tpu].",
        "TPU has a density of 12 g/cm3 [KB#mem_tpu].",
        # a number taken from another sentence of the same chunk
        "Dry PLA at 55-60 °C [KB#mem_pla].",
        "PETG prints with the bed at 230-250 °C [KB#mem_petg].",
        # a negation
        "PLA does not soften near 55-60 °C [KB#mem_pla].",
        "PLA is UV stable [KB#mem_pla].",
        # °F for °C
        "PETG prints at a nozzle temperature of 230-250 °F [KB#mem_petg].",
        # two entities where the chunk is about one
        "Both PLA and PETG print at a nozzle temperature of 230-250 °C [KB#mem_petg].",
        # the comparison turned round
        "ABS warps somewhat less than ASA [KB#mem_asa].",
        # the kind's word with another number
        "TPU weighs about 1,500 kg/m3 [KB#mem_tpu].",
    ],
)
def test_false_cited_claims_do_not_stand(claim: str) -> None:
    assert status(claim) != "supported"


@pytest.mark.parametrize(
    "claim",
    [
        "ABS handles heat to around 95-100 °C [KB#mem_abs].",
        # a unit conversion added, and in other units altogether
        "ABS handles heat to about 95 °C (203 °F) [KB#mem_abs].",
        "TPU has a density of 1200 kg/m3 [KB#mem_tpu].",
        # a range's width
        "PETG has a 20 °C nozzle window, 230-250 °C [KB#mem_petg].",
        # a spelling of the name
        "PET-G prints at a nozzle temperature of 230-250 °C [KB#mem_petg].",
        # the only name in passing, the subject implied
        "Unlike ABS, it warps somewhat less [KB#mem_asa].",
        # a sign and a glued unit read right
        "TPU stays flexible down to -50 °C [KB#mem_tpu].",
        "A 0.4mm nozzle at 40mm/s works well for PETG [KB#mem_petg].",
        # a negation the chunk states
        "PLA is not UV stable, unlike ASA [KB#mem_pla].",
        "Use ABS or ASA [KB#mem_abs].",
        # a word that only names the quantity's kind: "weighs" for a density
        "TPU weighs about 1,200 kg/m3 [KB#mem_tpu].",
    ],
)
def test_true_cited_claims_stand(claim: str) -> None:
    assert status(claim) == "supported", check_claims(claim, SHOWN)[0].reason


def test_quantities_keep_units_signs_ranges_and_decimals() -> None:
    read = {
        text: [(q.low, q.high, q.unit) for q in quantities(text)]
        for text in ("0.8mm", "60mm/s", "-80 °C", "1,5 g/cm3", "55-60 °C", "between 4 and 6 hours")
    }
    assert read["0.8mm"] == [(0.8, 0.8, "millimeter")]
    assert read["60mm/s"] == [(60.0, 60.0, "millimeter / second")]
    assert read["-80 °C"] == [(-80.0, -80.0, "degree_Celsius")]
    assert read["1,5 g/cm3"] == [(1.5, 1.5, "gram / centimeter ** 3")]
    assert read["55-60 °C"] == [(55.0, 60.0, "degree_Celsius")]
    assert read["between 4 and 6 hours"] == [(4.0, 6.0, "hour")]
    # digits inside names are not numbers
    assert quantities("PA6, 6061-T6 and TPU 95A") == ()
    (f,), (c,) = quantities("140 °F"), quantities("60 °C")
    assert same_quantity(f, c) and not same_quantity(quantities("60 °F")[0], c)


def test_a_claim_is_checked_against_the_chunk_as_the_model_was_shown_it() -> None:
    # the KB section showed PLA trimmed after its first sentence (`Fitted.shown`)
    rendered = format_chunk(PLA)
    shown = {"mem_pla": as_shown(PLA, rendered[: rendered.index(" Dry it")])}
    assert "45-50" not in shown["mem_pla"].text
    (claim,) = check_claims("Dry PLA at 45-50 °C for 4-6 hours [KB#mem_pla].", shown)
    assert claim.status == "dropped"
    (claim,) = check_claims("Dry PLA at 45-50 °C for 4-6 hours [KB#mem_pla].", SHOWN)
    assert claim.status == "supported"


def test_an_entity_is_one_thing_by_either_of_its_heading_names() -> None:
    """`PLA (polylactic acid)` in a heading names PLA: a claim naming it so stood dropped."""
    pla = Chunk(
        "mem_heat",
        "PLA softens near its glass transition temperature of about 55-60 °C; its heat "
        "deflection temperature is roughly 50-55 °C.",
        "demo/pla.md",
        heading="PLA (polylactic acid) > Heat resistance",
    )
    glue = Chunk(
        "mem_glue",
        "Cyanoacrylate bonds most plastics in seconds but lets go above about 80 °C.",
        "adhesive/cyanoacrylate.md",
        heading="cyanoacrylate (super glue) > Limits",
    )
    shown = shown_whole({c.id: c for c in (pla, glue, PETG)})

    def check(claim: str) -> tuple[str, str]:
        (checked,) = check_claims(claim, shown)
        return checked.status, checked.reason

    for true in (
        "PLA (polylactic acid) softens near its glass transition of about 55-60 °C [KB#mem_heat].",
        "Polylactic acid softens near its glass transition of about 55-60 °C [KB#mem_heat].",
        "Super glue lets go above about 80 °C [KB#mem_glue].",
    ):
        assert check(true)[0] == "supported", check(true)
    assert check("PETG softens near its glass transition of 55-60 °C [KB#mem_heat].") == (
        "dropped",
        "PETG",  # as the claim writes it, not a lookup key
    )


def test_a_dropped_claim_says_what_the_chunk_is_about_as_both_write_it() -> None:
    both = Chunk(
        "mem_both",
        "PLA softens near 55-60 °C. PA6 stays stiff far hotter.",
        "filament/compare.md",
        heading="Filament heat",
    )
    (checked,) = check_claims(
        "PA6 softens near 55-60 °C [KB#mem_both].", shown_whole({"mem_both": both})
    )
    assert (checked.status, checked.reason) == ("dropped", "PA6 (the chunk says it of PLA)")


def test_misattributed_and_uncited_claims_are_retagged_and_unsupported_ones_dropped() -> None:
    answer = (
        "ASA or ABS.\n"
        "- ABS handles heat to around 95-100 °C [KB#mem_pla].\n"
        "- Nylon is the most hygroscopic common filament.\n"
        "- ABS melts at 400 °C [KB#mem_abs].\n"
        "- PEEK is another option.\n"
        "- Pick what suits you."
    )
    claims = check_claims(answer, SHOWN)
    by_status = {c.status: c for c in claims}
    assert [c.status for c in claims] == ["retagged", "retagged", "retagged", "dropped", "uncited"]
    assert claims[0].text == "ASA or ABS [KB#mem_abs]."
    assert by_status["dropped"].cited == ("mem_abs",)
    revised = revise(answer, claims)
    assert "ABS handles heat to around 95-100 °C [KB#mem_abs]." in revised
    assert "hygroscopic common filament [KB#mem_nylon]." in revised
    assert "400" not in revised and "Pick what suits you." in revised
    # the uncited claim counts: 3 of the 4 claims that stand are supported
    assert support_share(claims) == pytest.approx(3 / 4)


def test_a_revision_that_deletes_its_tags_does_not_raise_its_support() -> None:
    tagged = check_claims("ABS melts at 400 °C [KB#mem_abs].", SHOWN)
    untagged = check_claims("ABS melts at 400 °C.", SHOWN)
    assert [c.status for c in tagged] == [c.status for c in untagged] == ["dropped"]
    assert support_share(untagged) is None


def test_entailment_settles_what_numbers_and_names_cannot() -> None:
    asked = []

    def entail(pairs):
        asked.extend(pairs)
        return [-3.0 if "does not" in claim else 2.0 for claim, _ in pairs]

    claim = "PLA does not soften near 55-60 °C [KB#mem_pla]."
    (checked,) = check_claims(claim, SHOWN, entail)
    assert checked.status == "dropped" and asked and asked[0][0].startswith("PLA does not")
    (checked,) = check_claims("PLA gets soft around 55-60 °C [KB#mem_pla].", SHOWN, entail)
    assert checked.status == "supported" and "entailment" in checked.reason
