"""Which property a comparison question asks: the vocabulary's rule against the embedding model.

Thirty questions written before any method was run on them (none is a test's or the issues'
example), each with the properties that answer it on the bundled eval KB, or None where the KB
has no figure of what is asked (price, friction, machinability...). Three readers:

* `rule`: `KbVocabulary.property_asked` (the KB's own property names in the question, else the
  noun an adjective's comparison asks for: "lightest" density);
* `embedding`: the KB's embedding model (all-MiniLM-L6-v2), the property whose name is nearest
  the question, if its cosine reaches a threshold;
* `rule+embedding`: the rule, and the embedding where the rule finds none.

Run: `PYTHONPATH=. python bench/property_asked.py` (prints a table; about a minute on two cores).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from collective.kb.chunking import split_text
from collective.kb.embeddings import embedder_for
from collective.kb.names import chunk_vocabulary
from collective.kb.store import Chunk, chunk_id

HEAT = {"heat deflection", "heat resistance", "glass transition temperature"}
QUESTIONS: list[tuple[str, set[str | None]]] = [
    ("Which wood is softest: balsa, pine or cedar?", {"janka hardness"}),
    ("Which of these plastics weighs the least per volume: HDPE, PVC or PTFE?", {"density"}),
    ("Which filament needs the hottest bed, ABS or PETG?", {"bed temperature"}),
    ("Which metal liquefies at the lowest temperature: brass, bronze or copper?",
     {"melting range"}),
    ("Which plastic tolerates the highest continuous temperature: PEEK rod, PVDF or "
     "polysulfone?", {"service temperature"}),
    ("Which is stronger in tension: acetal or nylon 66?", {"tensile strength"}),
    ("Which alloy yields first under load: 6061-T6 or 5052-H32?", {"yield strength"}),
    ("Which filament must be dried the longest: PA6 nylon or PETG?", {"drying time"}),
    ("Which needs the hotter drying oven, ASA or ABS?", {"drying temperature"}),
    ("Which filament survives a hot car best: PLA, PETG or ASA?", HEAT),
    ("Which glue cures fastest: epoxy, polyurethane or PVA glue?", {"cure time"}),
    ("Which is heavier, titanium or aluminium?", {"density"}),
    ("Which is the most expensive metal here?", {None}),
    ("Which plastic is the most slippery?", {None}),
    ("Which wood resists dents best?", {"janka hardness"}),
    ("Which filament prints at the coolest nozzle?", {"nozzle temperature"}),
    ("Which metal is the lightest?", {"density"}),
    ("Which is the densest wood?", {"density"}),
    ("Which plastic is the most chemically resistant?", {None}),
    ("Which metal is the easiest to machine?", {None}),
    ("Which filament softens at the lowest temperature?", HEAT),
    ("Which plastic can take the most heat in service?", {"service temperature"}),
    ("Which has the highest ultimate tensile strength, 7075-T6 or Ti-6Al-4V?",
     {"tensile strength"}),
    ("Which glue handles the most heat?", {"temperature range"}),
    ("Which of PA12 and PA6 absorbs more water?", {None}),
    ("What is the toughest wood for a workbench top?", {None, "janka hardness"}),
    ("Which is more rigid, PLA or PETG?", {None}),
    ("Which steel melts at a higher temperature, 304 or 316?", {"melting range"}),
    ("Which filament needs the warmest print bed?", {"bed temperature"}),
    ("Which aluminium is strongest?", {"tensile strength"}),
]  # fmt: skip


HELD_OUT: list[tuple[str, set[str | None]]] = [
    ("Which is the lightest wood: balsa, teak or walnut?", {"density"}),
    ("Which plastic has the greatest tensile strength: PVC, PTFE or PET-P?", {"tensile strength"}),
    ("Which filament has the lowest glass transition?", {"glass transition temperature"}),
    ("Which metal has the highest yield?", {"yield strength"}),
    ("Which hardwood is hardest, red oak or white ash?", {"janka hardness"}),
    ("Which is cheaper, HDPE or PEEK rod?", {None}),
    ("Which glue has the longest cure?", {"cure time"}),
    ("Which plastic is rated for the hottest service?", {"service temperature"}),
    ("Which of these bronzes or brasses melts lowest?", {"melting range"}),
    ("Which filament needs the coolest drying temperature?", {"drying temperature"}),
]
"""Ten more, written after the rule was revised on the thirty above, run once."""


def main() -> None:
    """Print each reader's accuracy on the questions, and each question's answers."""
    kb = Path(__file__).parents[1] / "tests" / "data" / "eval_kb"
    chunks = [
        Chunk(chunk_id(p.text, str(f), p.heading), p.text, str(f), p.tags, heading=p.heading)
        for f in sorted(kb.rglob("*.md"))
        for p in split_text(f.read_text(encoding="utf-8"))
    ]
    vocab = chunk_vocabulary(chunks)
    properties = vocab.properties()
    embedder = embedder_for("builtin")
    assert embedder is not None
    names = embedder.embed(properties)
    questions = embedder.embed([q for q, _ in QUESTIONS])
    cosines = questions @ names.T

    def nearest(i: int, threshold: float) -> str | None:
        best = int(np.argmax(cosines[i]))
        return properties[best] if cosines[i, best] >= threshold else None

    held = [vocab.property_asked(q) for q, _ in HELD_OUT]
    right = sum(a in ok for a, (_, ok) in zip(held, HELD_OUT, strict=True))
    print(f"rule on the ten held out: {right} of {len(HELD_OUT)} right; answers: {held}")
    rule = [vocab.property_asked(q) for q, _ in QUESTIONS]
    readers: dict[str, list[str | None]] = {"rule": rule}
    for t in (0.3, 0.4, 0.5):
        readers[f"embedding>={t}"] = [nearest(i, t) for i in range(len(QUESTIONS))]
        readers[f"rule+embedding>={t}"] = [
            r if r is not None else nearest(i, t) for i, r in enumerate(rule)
        ]
    print(f"{'reader':<24} right of {len(QUESTIONS)}   wrong figure   none where one")
    for name, answers in readers.items():
        pairs = list(zip(answers, (ok for _, ok in QUESTIONS), strict=True))
        right = sum(a in ok for a, ok in pairs)
        wrong = sum(a is not None and a not in ok for a, ok in pairs)
        missed = sum(a is None and None not in ok for a, ok in pairs)
        print(f"{name:<24} {right:>8}   {wrong:>12}   {missed:>14}")
    print()
    for i, (q, ok) in enumerate(QUESTIONS):
        print(f"{q[:70]:<70} rule={rule[i]} emb={nearest(i, 0.0)} ({cosines[i].max():.2f}) ok={ok}")


if __name__ == "__main__":
    main()
