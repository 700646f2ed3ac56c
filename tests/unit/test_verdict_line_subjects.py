"""A quoted line gets its subject named first only where the document is a thing, not a topic.

Ten documents of my own, none from the issue: things (a grade, an alias, a common noun, a bare
noun phrase) beside topics (a guide, a how-to, notes), each line quoted alone.
"""

from __future__ import annotations

import pytest

from collective.kb.names import chunk_vocabulary
from collective.kb.store import Chunk
from collective.verdict.agreement import Asked
from collective.verdict.lines import supporting_lines
from collective.verdict.support import shown_whole

CASES = [
    # (heading, the chunk's text, the line as quoted)
    ("PLA (polylactic acid) > Print settings", "Typical nozzle temperature is 190-220 °C.",
     "PLA (polylactic acid): Typical nozzle temperature is 190-220 °C."),
    ("6061-T6 aluminium > Welding", "Welds readily with TIG and 4043 filler.",
     "6061-T6 aluminium: Welds readily with TIG and 4043 filler."),
    ("bearing bronze > Lubrication", "Needs oil every 200 running hours.",
     "bearing bronze: Needs oil every 200 running hours."),
    ("walnut > Finishing", "Takes oil well and darkens with age.",
     "walnut: Takes oil well and darkens with age."),
    ("cyanoacrylate (super glue) > Cure time", "Sets in 10-30 seconds on skin.",
     "cyanoacrylate (super glue): Sets in 10-30 seconds on skin."),
    ("contact cement > What it bonds", "Contact cement bonds laminates and leather.",
     "Contact cement bonds laminates and leather."),
    ("Choosing a material > Parts in a hot car", "A car interior in summer sun reaches 60-80 °C.",
     "A car interior in summer sun reaches 60-80 °C."),
    ("Drying and storing filament > Storage", "Store opened spools in sealed boxes with desiccant.",
     "Store opened spools in sealed boxes with desiccant."),
    ("Safety in the workshop > Ventilation", "Open a window while sanding.",
     "Open a window while sanding."),
    ("How to glue wood > Clamping", "Clamp for at least 30 minutes.",
     "Clamp for at least 30 minutes."),
    ("Notes on finishes > Oils", "Boiled linseed oil cures in about 24 hours.",
     "Boiled linseed oil cures in about 24 hours."),
]  # fmt: skip
CHUNKS = [
    Chunk(f"mem_{n}", text, f"kb/{heading.split(' > ')[0]}.md", heading=heading)
    for n, (heading, text, _) in enumerate(CASES)
]
VOCABULARY = chunk_vocabulary(CHUNKS)
SHOWN = shown_whole({c.id: c for c in CHUNKS})


@pytest.mark.parametrize(("n", "expected"), [(n, case[2]) for n, case in enumerate(CASES)])
def test_a_line_is_led_by_its_thing_s_name_never_by_a_topic_s_title(n: int, expected: str):
    chunk = CHUNKS[n]
    lines = supporting_lines(
        Asked("Tell me more."), {chunk.id: SHOWN[chunk.id]}, {chunk.id: 0.9}, vocabulary=VOCABULARY
    )
    assert lines == [f"{expected} [KB#{chunk.id}]"]


# A document on several things names each in a section: a sentence that opens with its section's
# name names its subject ("Engineering filaments: Polycarbonate is strong" was make demo's line);
# a section named for what the figures measure ("Drying", "Heat") names none.
SECTIONS = [
    ("Engineering filaments > Polycarbonate (PC)",
     "Polycarbonate is strong and has a heat deflection around 130-140 °C.",
     "Polycarbonate is strong and has a heat deflection around 130-140 °C."),
    ("Engineering filaments > Nylon (polyamide)", "Nylon is tough but absorbs water.",
     "Nylon is tough but absorbs water."),
    ("Engineering filaments > Carbon-fibre filled filaments",
     "Carbon-fibre filled filaments are stiff and light.",
     "Carbon-fibre filled filaments are stiff and light."),
    ("Wood glues > Hide glue", "Hide glue stays reversible with heat and water.",
     "Hide glue stays reversible with heat and water."),
    ("Wood glues > Casein glue", "Casein glue resists heat better than hide glue.",
     "Casein glue resists heat better than hide glue."),
    # the limit: a figure typed by the thing's own word ("babbitt melts temperature") makes the
    # section's name read as a property's, and the document's title goes first, here and in
    # the document's other sentences on it
    ("Bearing metals > Babbitt", "babbitt melts over 240-260 °C.",
     "Bearing metals: babbitt melts over 240-260 °C."),
    ("Bearing metals > Babbitt", "Babbitt is soft and embeds grit.",
     "Bearing metals: Babbitt is soft and embeds grit."),
    ("Engineering filaments > Drying", "Drying temperature is 70-80 °C for nylon.",
     "Engineering filaments: Drying temperature is 70-80 °C for nylon."),
    ("Bearing metals > Heat deflection", "Heat deflection is seldom given for these.",
     "Bearing metals: Heat deflection is seldom given for these."),
    ("Engineering filaments > Nozzle temperature", "Nozzle temperature runs 240-300 °C.",
     "Engineering filaments: Nozzle temperature runs 240-300 °C."),
    ("Wood glues > Hide glue", "It sets as it cools.", "Wood glues: It sets as it cools."),
    ("Bearing metals > Babbitt", "Tin-based babbitt resists corrosion.",
     "Bearing metals: Tin-based babbitt resists corrosion."),
    ("Engineering filaments > PEEK", "PEEKs are rare in hobby printers.",
     "Engineering filaments: PEEKs are rare in hobby printers."),  # not the name as a whole word
]  # fmt: skip
SECTION_CHUNKS = [
    Chunk(f"mem_s{n}", text, f"kb/{heading.split(' > ')[0]}.md", heading=heading)
    for n, (heading, text, _) in enumerate(SECTIONS)
]


@pytest.mark.parametrize(("n", "expected"), [(n, case[2]) for n, case in enumerate(SECTIONS)])
def test_a_sentence_opening_with_its_sections_thing_names_its_subject(n: int, expected: str):
    chunk = SECTION_CHUNKS[n]
    vocabulary = chunk_vocabulary(SECTION_CHUNKS)
    shown = shown_whole({chunk.id: chunk})
    lines = supporting_lines(Asked("Tell me more."), shown, {chunk.id: 0.9}, vocabulary=vocabulary)
    assert lines == [f"{expected} [KB#{chunk.id}]"]


# A chunk whose best sentence the verdict already says offers its next one ("ASA or ABS are the
# usual choices" after a direct answer that said the car's and PLA's temperatures: make demo's
# verdict then named neither, in one run of three).
CAR = (
    "A car interior reaches 60-80 °C in summer. PLA softens there and sags. "
    "ASA or ABS are the usual choices for a car."
)
IRON = (
    "Cast iron rusts if left wet. Dry it on the stove after washing. A thin coat of oil stops rust."
)
WALNUT = "Walnut has a density of about 0.61 g/cm3. It is easy to work. Walnut darkens with age."
GLUE = (
    "Hide glue sets as it cools. Heat and water release the joint. "
    "Luthiers use hide glue for repairs."
)
SAID_ALREADY = [
    # (question, the chunk, what the verdict already says, the line quoted or None)
    ("Which filament for a part in a hot car?", CAR, "A car interior reaches 60-80 °C in summer.",
     "ASA or ABS are the usual choices for a car."),
    ("Which filament for a part in a hot car?", CAR,
     "A car interior reaches 60-80 °C in summer. ASA or ABS are the usual choices for a car.",
     "PLA softens there and sags."),
    ("Which filament for a part in a hot car?", CAR, CAR, None),  # all said: nothing
    ("Which filament for a part in a hot car?", CAR, "PLA softens there and sags.",
     "A car interior reaches 60-80 °C in summer."),
    ("How do I stop a cast iron pan from rusting?", IRON, "Cast iron rusts if left wet.",
     "A thin coat of oil stops rust."),
    ("How do I stop a cast iron pan from rusting?", IRON,
     "Cast iron rusts if left wet; a thin coat of oil stops rust.",
     "Dry it on the stove after washing."),
    ("How dense is walnut?", WALNUT, "Walnut has a density of about 0.61 g/cm3.",
     "Walnut darkens with age."),  # "It is easy to work" holds the said figure with its "it"
    ("What is hide glue good for?", GLUE, "Luthiers use hide glue for repairs.",
     "Hide glue sets as it cools."),
    ("What is hide glue good for?", GLUE, "Hide glue sets as it cools.",
     "Luthiers use hide glue for repairs."),
    ("What is hide glue good for?", GLUE, "", "Hide glue sets as it cools."),  # nothing said: first
]  # fmt: skip


@pytest.mark.parametrize(("question", "text", "said", "quoted"), SAID_ALREADY)
def test_a_chunk_whose_best_sentence_is_said_offers_its_next(question, text, said, quoted):
    chunk = Chunk("mem_said", text, "kb/notes.md", heading="Notes on the shop > Tips")
    shown = shown_whole({chunk.id: chunk})
    lines = supporting_lines(Asked(question), shown, {chunk.id: 0.9}, [chunk.id], said=said)
    assert lines == ([f"{quoted} [KB#mem_said]"] if quoted else [])
