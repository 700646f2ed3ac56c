"""Names in the verdict's lines, on a workshop KB of my own.

A thing's name is no figure: its digits never make a line read as said already (held-out: "Is
5052 aluminium OK for a boat hull in seawater?" lost 5052-H32's corrosion line, its "5052" and
"32" found in the direct answer). A thing is the same by any name the KB knows: a direct answer
a line holds under another of its names is said once (held-out: "Plexiglas is used for windows,
light guides and display cases", then "Acrylic is used for windows, light guides and ...").
"""

from __future__ import annotations

import functools

import pytest

from collective.kb.names import chunk_vocabulary
from collective.kb.store import Chunk
from collective.verdict.agreement import Asked
from collective.verdict.lines import said_once, supporting_lines
from collective.verdict.support import shown_whole

THINGS = {
    # key: (title, a line on its use, a line on something else the question asks)
    "m8": ("M8 bolt", "An M8 bolt suits machine frames and brackets.",
           "Corrosion of M8 bolts: zinc plating rusts outdoors within a season."),
    "r32": ("R32 refrigerant", "R32 refrigerant is used in split air conditioners.",
            "Safety of R32 refrigerant: mildly flammable, so keep sparks away during service."),
    "cat6": ("Cat6 cable", "Cat6 cable is used for office networks.",
             "Routing Cat6 cable: it bends poorly around tight corners."),
    "lfp": ("LiFePO4 cell", "A LiFePO4 cell is used in campervan batteries.",
            "Charging LiFePO4 cells: never charge them below freezing."),
    "g10": ("G10 board", "G10 board is used for knife handles.",
            "Machining G10 board: its dust is abrasive, so wear a mask."),
    "wd40": ("WD-40", "WD-40 is used to free stuck bolts.",
             "Lubrication with WD-40: it evaporates and does not lubricate for long."),
    "chain": ("316 chain", "316 chain is used for boat anchors.",
              "Corrosion of 316 chain: it resists seawater well."),
    "a4": ("A4 screw", "A4 screws are used for coastal decking.",
           "Corrosion of A4 screws: they resist salt spray."),
    "k49": ("Kevlar 49", "Kevlar 49 is used for boat hulls.",
            "Sunlight and Kevlar 49: it degrades in sunlight unless coated."),
    "t8": ("T8 tube", "A T8 tube is used for workshop ceiling lights.",
           "Flicker of T8 tubes: old ballasts make them flicker when cold."),
    "m6": ("M6 bolt", "An M6 bolt is tightened to 10 N·m.",
           "Tightening an M6 bolt: 10 N·m is enough for an aluminium frame."),
}  # fmt: skip
CHUNKS = [
    Chunk(f"mem_{key}_{n}", text, f"workshop/{key}.md", heading=f"{title} > {section}")
    for key, (title, *lines) in THINGS.items()
    for n, (section, text) in enumerate(zip(("Uses", "Care"), lines, strict=True))
]
SHOWN = shown_whole({c.id: c for c in CHUNKS})


@functools.cache
def vocabulary():
    return chunk_vocabulary(CHUNKS)


@pytest.mark.parametrize(
    ("question", "key", "quoted"),
    [
        ("Will M8 bolts rust outdoors?", "m8", True),
        ("Is R32 refrigerant flammable?", "r32", True),
        ("Does Cat6 cable bend around tight corners?", "cat6", True),
        ("Can I charge a LiFePO4 cell below freezing?", "lfp", True),
        ("Is G10 board dust abrasive when machining?", "g10", True),
        ("Does WD-40 lubricate for long?", "wd40", True),
        ("Does 316 chain resist seawater?", "chain", True),
        ("Do A4 screws resist salt spray?", "a4", True),
        ("Does Kevlar 49 degrade in sunlight?", "k49", True),
        ("Why do T8 tubes flicker when cold?", "t8", True),
        # a figure the direct answer already states is said: its line is not quoted again
        ("How tight should an M6 bolt be in an aluminium frame?", "m6", False),
    ],
)
def test_a_line_whose_only_digits_are_its_things_name_is_quoted(question, key, quoted) -> None:
    uses, care = f"mem_{key}_0", f"mem_{key}_1"
    direct = f"{SHOWN[uses].text} [KB#{uses}]"
    asked = Asked.read(question, vocabulary(), SHOWN.values())
    scores = {i: 0.9 if i == uses else 0.85 if i == care else 0.3 for i in SHOWN}
    lines = supporting_lines(asked, SHOWN, scores, [uses, care], vocabulary(), said=direct)
    assert (f"[KB#{care}]" in " ".join(lines)) is quoted, lines


ALIASED = [
    Chunk(f"mem_{key}", text, f"shop/{key}.md", heading=f"{title} > Notes")
    for key, title, text in [
        ("pmma", "acrylic (Plexiglas)", "Acrylic is used for windows and display cases."),
        ("pa", "nylon (polyamide)", "Nylon is used for gears and rollers."),
        ("ptfe", "PTFE (Teflon)", "PTFE has the lowest friction of any solid plastic."),
        ("ca", "cyanoacrylate (super glue)", "Cyanoacrylate sets in seconds on skin."),
        ("pe", "UHMW-PE (ultra-high molecular weight polyethylene)",
         "UHMW-PE is used for chute liners."),
        ("pvc", "PVC (vinyl)", "PVC is used for pipes and tanks."),
    ]
]  # fmt: skip
ALIASED_BY_ID = {c.id: c for c in ALIASED}


@functools.cache
def aliased():
    return chunk_vocabulary(ALIASED)


@pytest.mark.parametrize(
    ("direct", "key", "once"),
    [
        ("Plexiglas is used for windows and display cases.", "pmma", True),
        ("Acrylic is used for windows and display cases.", "pmma", True),
        ("Polyamide is used for gears and rollers.", "pa", True),
        ("Teflon has the lowest friction of any solid plastic.", "ptfe", True),
        ("Super glue sets in seconds on skin.", "ca", True),
        ("Ultra-high molecular weight polyethylene is used for chute liners.", "pe", True),
        ("Vinyl is used for pipes and tanks.", "pvc", True),
        # another thing, or a word the line lacks: said as the direct answer
        ("Nylon is used for windows and display cases.", "pmma", False),
        ("Teflon is used for pipes and tanks.", "pvc", False),
        ("Plexiglas is used for windows, display cases and aquariums.", "pmma", False),
        ("Polyamide is used for gears, rollers and bearings.", "pa", False),
    ],
)
def test_a_direct_answer_a_line_holds_under_another_name_is_said_once(direct, key, once) -> None:
    line = f"{ALIASED_BY_ID[f'mem_{key}'].text} [KB#mem_{key}]"
    said, lines = said_once(f"{direct} [KB#mem_{key}]", [line], aliased())
    assert (said == "") is once, (said, lines)
    assert lines == [line]
