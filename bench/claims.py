"""Constructed cited claims on the bundled eval KB: how many false ones the check catches.

Each claim cites one chunk (or two) of `tests/data/eval_kb`, chunked by the KB's own
`split_text`, and is checked as the verdict's lines are (`collective.verdict.support`) against a
shown set like a retrieval's: every chunk of the cited document, the same section of the two
documents after it in its folder, and every chunk of the documents a claim compares it with
(`also`). A false claim is *caught* when the check drops it (it is false of the whole KB, so a
retag to another chunk is a miss); a true one is *kept* when it stands as cited (`supported`).

The claims were written, and committed, before they were first run against the check; the
kinds follow the issue on verdicts (antonyms, negation in heading-style chunks, comparatives
and superlatives flipped, what follows "than"/"like", a list with an added item, units glued to
numbers, a point value from a range's width, rounding, a `Decision:` line, a thing the KB has no
document for as the subject of another's sentence) and others (a number or a unit changed, a
figure of another property, a name swapped, a °F conversion wrong).

    PYTHONPATH=. .venv/bin/python bench/claims.py [--show-misses] [--chunks]

Names are the KB's vocabulary as `kb add` stores it: titles, their short forms and the names
the files' front matter gives (`names: Teflon`), the figures those of the chunks shown
(`collective.verdict.shown`); with `--chunks`, the names read from the chunks alone
(`chunk_vocabulary`: titles and their short forms, no front matter).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collective.kb.chunking import heading_root, split_text  # noqa: E402
from collective.kb.store import Chunk, chunk_id  # noqa: E402

KB = ROOT / "tests" / "data" / "eval_kb"


@dataclass(frozen=True)
class Case:
    """One constructed claim: its kind, whether the KB makes it true, and what it cites."""

    kind: str
    true: bool
    text: str
    """The claim; `{0}` (and `{1}`) stand where its citation tags go, else the tag goes last."""
    cites: tuple[tuple[str, str], ...]
    """(document title, the start of its section heading) per cited chunk."""
    also: tuple[str, ...] = ()
    """Titles of more documents whose chunks are shown beside it."""


def T(kind: str, text: str, title: str, section: str, *also: str) -> Case:
    return Case(kind, True, text, ((title, section),), also)


def F(kind: str, text: str, title: str, section: str, *also: str) -> Case:
    return Case(kind, False, text, ((title, section),), also)


CASES: list[Case] = [
    # -- false: an antonym where the chunk says the opposite, no "not" in either ------------
    F("antonym", "7075-T6 aluminium is easily weldable by fusion.", "7075-T6 aluminium", "Welding"),
    F("antonym", "Red oak is rot resistant outdoors.", "red oak", "Outdoor"),
    F("antonym", "C110 copper is easy to machine cleanly.", "C110 copper", "Machining"),
    F("antonym", "Gray cast iron is easy to weld.", "gray cast iron", "Welding"),
    F("antonym", "PLA warps badly and needs an enclosure.", "PLA", "Warping"),
    F("antonym", "Polycarbonate barely warps.", "polycarbonate", "Warping"),
    F("antonym", "Hot melt glue is strong.", "hot melt glue", "Strength"),
    F("antonym", "PVA wood glue fills gaps well.", "PVA wood glue", "Gap"),
    F("antonym", "Acrylic is scratch resistant.", "acrylic", "Friction"),
    F("antonym", "O1 tool steel resists rust.", "O1 tool steel", "Corrosion"),
    F("antonym", "1018 mild steel is expensive.", "1018 mild steel", "Cost"),
    F("antonym", "Teak is cheap.", "teak", "Cost"),
    F("antonym", "Machining Ti-6Al-4V titanium is easy.", "Ti-6Al-4V titanium", "Machining"),
    F("antonym", "Printed PVA parts are strong.", "PVA", "Mechanical"),
    F(
        "antonym",
        "C932 bearing bronze has excellent weldability.",
        "C932 bearing bronze",
        "Welding",
    ),  # fmt: skip
    F("antonym", "Silicone sealant is strong and rigid.", "silicone sealant", "Strength"),
    # -- false: negation lost in a heading-style chunk ("X of Y: not durable") --------------
    F("heading negation", "Outdoor durability of balsa: durable.", "balsa", "Outdoor"),
    F(
        "heading negation",
        "Outdoor durability of white ash: durable outdoors.",
        "white ash",
        "Outdoor",
    ),  # fmt: skip
    F("heading negation", "Gap filling with contact cement: fills gaps.", "contact cement", "Gap"),
    F(
        "heading negation",
        "Welding 7075-T6 aluminium: considered weldable by fusion processes.",
        "7075-T6 aluminium",
        "Welding",
    ),  # fmt: skip
    # -- false: a comparative or superlative flipped ---------------------------------------
    F("comparative", "ASA warps more than ABS.", "ASA", "Warping", "ABS"),
    F("comparative", "PA12 nylon warps more than PA6.", "PA12 nylon", "Warping", "PA6 nylon"),
    F(
        "comparative",
        "PA12 nylon is more hygroscopic than PA6.",
        "PA12 nylon",
        "Drying",
        "PA6 nylon",
    ),  # fmt: skip
    F(
        "comparative",
        "7075-T6 aluminium is cheaper than 6061.",
        "7075-T6 aluminium",
        "Cost",
        "6061-T6 aluminium",
    ),  # fmt: skip
    F(
        "comparative",
        "316 stainless steel is cheaper than 304.",
        "316 stainless steel",
        "Cost",
        "304 stainless steel",
    ),  # fmt: skip
    F(
        "comparative",
        "Printed PETG-CF parts are less stiff than PETG.",
        "PETG-CF",
        "Mechanical",
        "PETG",
    ),  # fmt: skip
    F(
        "comparative",
        "Printed PLA-CF parts are less brittle than plain PLA.",
        "PLA-CF",
        "Mechanical",
        "PLA",
    ),  # fmt: skip
    F(
        "comparative",
        "7075-T6 aluminium resists corrosion better than 6061.",
        "7075-T6 aluminium",
        "Corrosion",
        "6061-T6 aluminium",
    ),  # fmt: skip
    F(
        "comparative",
        "PET-P has more friction and wear than acetal in humid air.",
        "PET-P",
        "Friction",
        "acetal",
    ),  # fmt: skip
    F("superlative", "PTFE has the highest friction of any solid plastic.", "PTFE", "Friction"),
    F(
        "superlative",
        "UHMW-PE has the worst abrasion resistance of common plastics.",
        "UHMW-PE",
        "Friction",
    ),  # fmt: skip
    F("superlative", "PLA is the hardest material for beginners.", "PLA", "Notes"),
    # -- false: the thing after "than" / "like" / "similar to" changed ---------------------
    F(
        "than/like",
        "PETG prints at a nozzle temperature of 230-250 °C, hotter than ABS.",
        "PETG",
        "Print",
        "ABS",
    ),  # fmt: skip
    F("than/like", "HIPS warps like PLA and likes an enclosure.", "HIPS", "Warping", "PLA"),
    F("than/like", "Printed ASA parts are tough, similar to PLA.", "ASA", "Mechanical", "PLA"),
    F("than/like", "PA12 nylon warps less than ABS.", "PA12 nylon", "Warping", "ABS"),
    F(
        "than/like",
        "Heat resistance of PLA-CF: similar to PETG, about 60 °C.",
        "PLA-CF",
        "Heat",
        "PETG",
    ),  # fmt: skip
    F(
        "than/like",
        "316 stainless steel work-hardens like 6061-T6 aluminium.",
        "316 stainless steel",
        "Machining",
        "6061-T6 aluminium",
    ),  # fmt: skip
    # -- false: a list with an item added --------------------------------------------------
    F("list", "PVA wood glue bonds wood, paper and metal.", "PVA wood glue", "What it bonds"),
    F(
        "list",
        "Hot melt glue bonds wood, fabric, cardboard and glass.",
        "hot melt glue",
        "What it bonds",
    ),  # fmt: skip
    F(
        "list",
        "PA6 nylon is used for gears, hinges, bushings and springs.",
        "PA6 nylon",
        "Typical uses",
    ),  # fmt: skip
    F(
        "list",
        "Teak is used for boat decks, outdoor furniture, cutting boards and guitar necks.",
        "teak",
        "Typical uses",
    ),  # fmt: skip
    F(
        "list",
        "Contact cement bonds laminates, veneers, leather, rubber and glass.",
        "contact cement",
        "What it bonds",
    ),  # fmt: skip
    # -- false: a unit glued to its number --------------------------------------------------
    F("glued unit", "PTFE is rated for continuous service up to 400C.", "PTFE", "Service"),
    F("glued unit", "PEEK rod is rated for continuous service up to 330C.", "PEEK rod", "Service"),
    F("glued unit", "ABS prints at a nozzle temperature of 300C.", "ABS", "Print"),
    F("glued unit", "PLA prints with the bed at 90C.", "PLA", "Print"),
    # -- false: a point value equal to a range's width -------------------------------------
    F("range width", "PLA prints at 30 °C.", "PLA", "Print"),
    F("range width", "Dry PLA for 2 hours.", "PLA", "Drying"),
    F("range width", "ABS has a heat deflection of about 5 °C.", "ABS", "Heat"),
    F("range width", "TPU 95A prints at a nozzle temperature of 20 °C.", "TPU 95A", "Print"),
    # -- false: a thing the KB has no document for, as the subject of another's sentence -----
    F(
        "unknown subject",
        "Hickory has a density of about 0.67 g/cm3; Janka hardness about 1320 lbf.",
        "white ash",
        "Density",
    ),  # fmt: skip
    F(
        "unknown subject",
        "Inconel 718 has a density of about 8.00 g/cm3 and melts over 1400-1450 °C.",
        "304 stainless steel",
        "Density",
    ),  # fmt: skip
    F("unknown subject", "Beech has a density of about 0.75 g/cm3.", "white oak", "Density"),
    F(
        "unknown subject",
        "Mahogany is used for boat decks, outdoor furniture and cutting boards.",
        "teak",
        "Typical uses",
    ),  # fmt: skip
    F("unknown subject", "Zinc melts over 885-900 °C.", "C360 brass", "Density"),
    F(
        "unknown subject",
        "Gorilla tape bonds wood, stone, metal, ceramics and foam.",
        "polyurethane glue",
        "What it bonds",
    ),  # fmt: skip
    # -- false: a known thing swapped in ---------------------------------------------------
    F(
        "thing swapped",
        "6061-T6 aluminium has a density of about 2.81 g/cm3.",
        "7075-T6 aluminium",
        "Density",
        "6061-T6 aluminium",
    ),  # fmt: skip
    F(
        "thing swapped",
        "ASA is used for housings, automotive interior parts and tool handles.",
        "ABS",
        "Typical uses",
        "ASA",
    ),  # fmt: skip
    F(
        "thing swapped",
        "Red oak has a Janka hardness about 1360 lbf.",
        "white oak",
        "Density",
        "red oak",
    ),  # fmt: skip
    # -- false: a number or unit changed, a figure of another property ---------------------
    F("number", "PETG prints at a nozzle temperature of 260-280 °C.", "PETG", "Print"),
    F("number", "C360 brass melts over 1083 °C.", "C360 brass", "Density"),
    F("number", "White ash has a Janka hardness about 1360 lbf.", "white ash", "Density"),
    F("number", "The tensile strength of HDPE is about 62 MPa.", "HDPE", "Tensile"),
    F("unit", "Acetal stock has a density of 1.41 kg/m3.", "acetal", "Density"),
    F("other property", "PLA prints with the bed at 190-220 °C.", "PLA", "Print"),
    F("other property", "PETG has a heat deflection of about 80 °C.", "PETG", "Heat"),
    F(
        "other property",
        "The yield strength of 1018 mild steel is about 440 MPa.",
        "1018 mild steel",
        "Strength",
    ),  # fmt: skip
    F("rounding", "PTFE stock has a density of about 2.5 g/cm3.", "PTFE", "Density"),
    F("rounding", "White oak has a density of about 0.9 g/cm3.", "white oak", "Density"),
    F(
        "conversion",
        "PLA softens near its glass transition of about 60 °C (180 °F).",
        "PLA",
        "Heat",
    ),  # fmt: skip
    F("decision", "Decision: PLA, because it handles 100 °C in a hot car.", "PLA", "Heat"),
    F(
        "decision",
        "Decision: 7075-T6 aluminium, since it welds easily.",
        "7075-T6 aluminium",
        "Welding",
    ),  # fmt: skip
    # -- true: restated, in short names, glued units, rounding, conversion -----------------
    T("restated", "White ash has a density of about 0.67 g/cm3.", "white ash", "Density"),
    T("restated", "1018 mild steel is cheap and widely available.", "1018 mild steel", "Cost"),
    T("restated", "Teak is very expensive.", "teak", "Cost"),
    T("short name", "6061-T6 has a density of about 2.70 g/cm3.", "6061-T6 aluminium", "Density"),
    T("short name", "Copper has a density of about 8.96 g/cm3.", "C110 copper", "Density"),
    T("short name", "316 melts over 1375-1400 °C.", "316 stainless steel", "Density"),
    T(
        "short name",
        "Polycarbonate sheet is rated for continuous service up to 120 °C.",
        "polycarbonate sheet",
        "Service",
    ),  # fmt: skip
    T(
        "trade name",
        "Super glue fails above about 80 °C.",
        "cyanoacrylate (super glue)",
        "Temperature",
    ),  # fmt: skip
    T("trade name", "Teflon is rated for continuous service up to 260 °C.", "PTFE", "Service"),
    T("acronym", "PMMA stock has a density of 1.19 g/cm3.", "acrylic", "Density"),
    T("acronym", "POM is rated for continuous service up to 105 °C.", "acetal", "Service"),
    T("acronym", "UHMW has very low friction.", "UHMW-PE", "Friction"),
    T("acronym", "CA glue sets in seconds to a minute.", "cyanoacrylate (super glue)", "Cure"),
    T("glued unit", "PTFE is rated for continuous service up to 260C.", "PTFE", "Service"),
    T("glued unit", "PTFE is rated for continuous service up to 260 C.", "PTFE", "Service"),
    T("rounding", "PTFE has a density of about 2.2 g/cm3.", "PTFE", "Density"),
    T(
        "rounding",
        "7075-T6 aluminium has a density of about 2.8 g/cm3.",
        "7075-T6 aluminium",
        "Density",
    ),  # fmt: skip
    T("conversion", "PTFE has a density of about 2170 kg/m3.", "PTFE", "Density"),
    T("conversion", "PTFE is rated for continuous service up to 500 °F.", "PTFE", "Service"),
    T("conversion", "White oak has a density of about 750 kg/m3.", "white oak", "Density"),
    T("within range", "PLA prints at a nozzle temperature of 200 °C.", "PLA", "Print"),
    T("within range", "Dry PLA at 45-50 °C for 5 hours if it strings.", "PLA", "Drying"),
    # -- true: negation, comparatives, superlatives, lists, as the chunks have them --------
    T(
        "negation",
        "7075-T6 aluminium is not weldable by fusion processes.",
        "7075-T6 aluminium",
        "Welding",
    ),  # fmt: skip
    T("negation", "Balsa is not durable outdoors.", "balsa", "Outdoor"),
    T("negation", "Red oak rots quickly outdoors.", "red oak", "Outdoor"),
    T("negation", "PLA barely warps and needs no enclosure.", "PLA", "Warping"),
    T("comparative", "ASA warps less than ABS.", "ASA", "Warping", "ABS"),
    T("comparative", "PA12 nylon warps less than PA6.", "PA12 nylon", "Warping", "PA6 nylon"),
    T(
        "comparative",
        "7075-T6 aluminium is more expensive than 6061.",
        "7075-T6 aluminium",
        "Cost",
        "6061-T6 aluminium",
    ),  # fmt: skip
    T(
        "comparative",
        "Printed PETG-CF parts are stiffer than PETG.",
        "PETG-CF",
        "Mechanical",
        "PETG",
    ),  # fmt: skip
    T("superlative", "PTFE has the lowest friction of any solid plastic.", "PTFE", "Friction"),
    T("than/like", "HIPS warps like ABS.", "HIPS", "Warping", "ABS"),
    T("list", "PVA wood glue bonds wood and paper.", "PVA wood glue", "What it bonds"),
    T("list", "PA6 nylon is used for gears and bushings.", "PA6 nylon", "Typical uses"),
    T(
        "range width", "PLA's nozzle temperature window, 190-220 °C, is 30 °C wide.", "PLA", "Print"
    ),  # fmt: skip
    T(
        "heading style",
        "Outdoor durability of white ash: not durable outdoors.",
        "white ash",
        "Outdoor",
    ),  # fmt: skip
    T(
        "pronoun",
        "It has a density of about 0.67 g/cm3 and a Janka hardness about 1320 lbf.",
        "white ash",
        "Density",
    ),  # fmt: skip
    Case(
        "two chunks",
        True,
        "PTFE is rated for continuous service up to 260 °C {0}, and its "
        "tensile strength is about 24 MPa {1}.",
        (("PTFE", "Service"), ("PTFE", "Tensile")),
    ),
]


def load_chunks() -> list[Chunk]:
    """The eval KB's chunks, as `kb add` splits its files (ids as the store makes them)."""
    out = []
    for path in sorted(KB.rglob("*.md")):
        source = str(path.relative_to(KB.parent))
        for piece in split_text(path.read_text()):
            cid = chunk_id(piece.text, source, piece.heading)
            out.append(Chunk(cid, piece.text, source, heading=piece.heading))
    return out


def _section(chunk: Chunk) -> str:
    return chunk.heading.partition(" > ")[2]


def find(chunks: list[Chunk], title: str, section: str) -> Chunk:
    """The chunk of document `title` whose section heading starts with `section`."""
    hits = [
        c
        for c in chunks
        if heading_root(c.heading).lower() == title.lower() and _section(c).startswith(section)
    ]
    if len(hits) != 1:
        raise SystemExit(f"no one chunk of {title!r} > {section!r}: {len(hits)} found")
    return hits[0]


def shown_for(case: Case, chunks: list[Chunk]) -> list[Chunk]:
    """The chunks shown beside a claim (see the module doc)."""
    cited = [find(chunks, *c) for c in case.cites]
    titles = [heading_root(c.heading) for c in chunks]
    docs = list(dict.fromkeys(titles))
    first = heading_root(cited[0].heading)
    folder = Path(cited[0].source).parent
    in_folder = {heading_root(c.heading) for c in chunks if Path(c.source).parent == folder}
    same_folder = [d for d in docs if d in in_folder]
    at = same_folder.index(first)
    neighbours = [same_folder[(at + n) % len(same_folder)] for n in (1, 2)]
    section = _section(cited[0])
    shown = list(cited)
    for c in chunks:
        root = heading_root(c.heading)
        if root == first or root.lower() in {a.lower() for a in case.also}:
            shown.append(c)
        elif root in neighbours and _section(c) == section:
            shown.append(c)
    return list({c.id: c for c in shown}.values())


def cited_text(case: Case, chunks: list[Chunk]) -> str:
    """The claim with its tags in place."""
    tags = [f"[KB#{find(chunks, *c).id}]" for c in case.cites]
    if "{0}" in case.text:
        return case.text.format(*tags)
    body = case.text.rstrip(".")
    return f"{body} {' '.join(tags)}."


def store_vocabulary(chunks: list[Chunk]):  # noqa: ANN201 - a bench helper
    """The vocabulary of the bundled eval KB as `kb add` stores it (its front matter's names)."""
    import tempfile

    from collective.kb.sqlite_store import SqliteKnowledgeStore
    from collective.verdict.shown import ShownVocabulary

    root = Path(tempfile.mkdtemp(prefix="claims-bench-"))
    store = SqliteKnowledgeStore(root / "kb.sqlite", embedder=None)
    store.add_paths([KB], base=KB.parent, embed=False)
    return ShownVocabulary(store.vocabulary(), [c.id for c in chunks])


def run(show_misses: bool, store: bool = True) -> dict[str, object]:
    """Every case through the check: caught, kept, and the misses."""
    from collective.kb.names import chunk_vocabulary
    from collective.verdict.support import check_claims, shown_whole

    chunks = load_chunks()
    vocabulary = store_vocabulary(chunks) if store else chunk_vocabulary(chunks)
    names = [c.heading for c in chunks]
    caught = kept = 0
    misses: list[tuple[Case, str, str]] = []
    by_kind: Counter[tuple[str, bool, bool]] = Counter()
    for case in CASES:
        shown = shown_whole({c.id: c for c in shown_for(case, chunks)})
        claims = check_claims(cited_text(case, chunks), shown, names=names, vocabulary=vocabulary)
        cited = {find(chunks, *c).id for c in case.cites}
        if case.true:
            ok = bool(claims) and all(c.status == "supported" and set(c.cited) <= cited
                                      for c in claims)  # fmt: skip
            kept += ok
        else:
            ok = bool(claims) and any(c.status == "dropped" for c in claims)
            caught += ok
        by_kind[(case.kind, case.true, ok)] += 1
        if not ok:
            why = "; ".join(f"{c.status}: {c.reason}" for c in claims) or "no claim read"
            misses.append((case, cited_text(case, chunks), why))
    false_n = sum(not c.true for c in CASES)
    true_n = sum(c.true for c in CASES)
    print(f"false caught: {caught}/{false_n} ({caught / false_n:.0%})")
    print(f"true kept:    {kept}/{true_n} ({kept / true_n:.0%})")
    if show_misses:
        for case, text, why in misses:
            print(f"- MISS ({'true' if case.true else 'false'}, {case.kind}): {text}\n    {why}")
    return {"caught": caught, "false": false_n, "kept": kept, "true": true_n, "misses": misses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument(
        "--chunks", action="store_true", help="names read from the chunks alone, not the KB's"
    )
    args = parser.parse_args()
    run(args.show_misses, store=not args.chunks)


if __name__ == "__main__":
    main()
