"""The claim check on cited claims built from the eval KB's fact tables: false caught, true kept.

Every claim cites one chunk of `tests/data/eval_kb` (chunked by the KB's own `split_text`) and is
checked as the judge's verdict is (`collective.verdict.support.check_claims`), against a shown set
like a retrieval's: the cited chunk, the other sections of its entity, and the same section of
three other entities. True claims restate a chunk in other words (with a unit conversion added,
a range's width, a spelling variant); false ones swap the entity, change a number or its unit,
negate, take a number from another section, or cite the wrong chunk. A false claim is *caught*
when the check does not let it stand as cited (`dropped`, or `retagged` to the chunk that does
state it); a true one is *kept* when it stands as cited (`supported`).

    .venv/bin/python bench/claim_check.py [--entail] [--show-misses]

`--entail` settles what numbers and names cannot with the embedded judge model (the 1.5B, in
process), as the council does; without it such claims are dropped.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "data"))

import generate_eval_kb as facts  # noqa: E402

from collective.kb.chunking import split_text  # noqa: E402
from collective.kb.store import Chunk, chunk_id  # noqa: E402
from collective.verdict.support import check_claims, shown_whole  # noqa: E402


@dataclass(frozen=True)
class Case:
    kind: str
    true: bool
    text: str
    cited: str
    shown: tuple[str, ...]


def load_chunks() -> dict[tuple[str, str], Chunk]:
    """The eval KB's chunks by (entity, section)."""
    out = {}
    for path, text in facts.render_kb().items():
        for piece in split_text(text):
            entity, _, section = piece.heading.partition(" > ")
            source = f"eval_kb/{path}"
            out[(entity, section)] = Chunk(
                chunk_id(piece.text, source, piece.heading), piece.text, source,
                heading=piece.heading,
            )  # fmt: skip
    return out


def _f(celsius: str) -> str:
    """A °C range written in °F, rounded as people write it."""
    parts = [round(float(v) * 9 / 5 + 32) for v in re.findall(r"\d+", celsius)]
    return "-".join(str(p) for p in parts) + " °F"


def _negate(text: str) -> str:
    for verb in (" is ", " are ", " has ", " needs ", " prints ", " welds ", " resists "):
        if verb in text:
            return text.replace(verb, {" is ": " is not ", " are ": " are not "}.get(
                verb, f" does not {verb.strip().rstrip('s')} "), 1)  # fmt: skip
    return "It is not true that " + text[0].lower() + text[1:]


def _bump(text: str, rng: random.Random) -> str:
    numbers = list(re.finditer(r"(?<![\w.-])\d+(?:\.\d+)?", text))
    m = rng.choice(numbers)
    value = float(m.group(0))
    new = value + max(5, round(value * 0.15)) if "." not in m.group(0) else round(value * 1.3, 2)
    new_text = f"{new:g}" if "." in m.group(0) else str(int(new))
    return text[: m.start()] + new_text + text[m.end() :]


def cases(chunks: dict[tuple[str, str], Chunk], seed: int = 7) -> list[Case]:
    rng = random.Random(seed)
    by_entity: dict[str, list[str]] = defaultdict(list)
    for entity, section in chunks:
        by_entity[entity].append(section)
    tables = {
        "filament": facts._table(facts.FILAMENTS),
        "metal": facts._table(facts.METALS),
        "plastic": facts._table(facts.PLASTICS),
        "wood": facts._table(facts.WOODS),
        "adhesive": facts._table(facts.ADHESIVES),
    }
    out: list[Case] = []

    def add(kind: str, true: bool, text: str, entity: str, section: str) -> None:
        cited = chunks[(entity, section)]
        others = [e for e in by_entity if e != entity and (e, section) in chunks]
        shown = [cited.id] + [chunks[(entity, s)].id for s in by_entity[entity] if s != section]
        shown += [chunks[(e, section)].id for e in rng.sample(others, min(3, len(others)))]
        out.append(Case(kind, true, f"{text} [KB#{cited.id}]", cited.id, tuple(shown)))

    def swap(name: str, category: str) -> str:
        return rng.choice([r[0] for r in tables[category] if r[0] != name])

    for row in tables["filament"]:
        name, nozzle, bed, heat, drying, warping, mech, uses = row[:8]
        section = "Print temperatures"
        add("true", True, f"For {name}, set the nozzle to {nozzle} °C and the bed to {bed} °C.",
            name, section)  # fmt: skip
        add("true: °F added", True,
            f"{name} prints with a nozzle temperature of {nozzle} °C ({_f(nozzle)}).",
            name, section)  # fmt: skip
        low, high = (int(v) for v in re.findall(r"\d+", nozzle))
        add("true: range width", True,
            f"{name} has a {high - low} °C nozzle window, {nozzle} °C.", name, section)  # fmt: skip
        other = swap(name, "filament")
        add("false: entity swapped", False,
            f"For {other}, set the nozzle to {nozzle} °C and the bed to {bed} °C.",
            name, section)  # fmt: skip
        add(
            "false: number changed",
            False,
            _bump(f"For {name}, set the nozzle to {nozzle} °C.", rng),
            name,
            section,
        )
        add("false: °F for °C", False,
            f"{name} prints with a nozzle temperature of {nozzle} °F.", name, section)  # fmt: skip
        add("false: bed given the nozzle's range", False,
            f"{name} prints with the bed at {nozzle} °C.", name, section)  # fmt: skip
        add(
            "false: negated",
            False,
            f"{name} does not print at a nozzle temperature of {nozzle} °C.",
            name,
            section,
        )
        add("true", True, f"When drying {name}: {drying}.", name, "Drying")
        add("false: number from another section", False,
            f"Dry {name} at {nozzle} °C.", name, "Drying")  # fmt: skip
        add(
            "false: wrong chunk",
            False,
            f"{name} prints at a nozzle temperature of {nozzle} °C.",
            name,
            "Drying",
        )
        add("true", True, f"{name} parts come out {mech}.", name, "Mechanical behaviour")
        add("false: entity swapped", False,
            f"{other} parts come out {mech}.", name, "Mechanical behaviour")  # fmt: skip
    for row in tables["metal"]:
        name, density, melting, strength = row[:4]
        section = "Density and melting range"
        add("true", True, f"The density of {name} is about {density} g/cm3.", name, section)
        add("true: kg/m3", True,
            f"{name} weighs about {round(float(density) * 1000):,} kg/m3, {density} g/cm3.",
            name, section)  # fmt: skip
        add(
            "false: number changed",
            False,
            _bump(f"The density of {name} is about {density} g/cm3.", rng),
            name,
            section,
        )
        add("false: entity swapped", False,
            f"The density of {swap(name, 'metal')} is about {density} g/cm3.",
            name, section)  # fmt: skip
        add("false: kg/m3 unconverted", False,
            f"{name} has a density of about {density} kg/m3.", name, section)  # fmt: skip
        add("true", True, f"{name} melts over {melting} °C.", name, section)
        add("false: glued unit changed", False,
            f"{name} melts over {melting}°F.", name, section)  # fmt: skip
        add("true", True, f"Figures for {name}: {strength}.", name, "Strength")
        add("false: wrong chunk", False,
            f"{name} melts over {melting} °C.", name, "Strength")  # fmt: skip
    for row in tables["plastic"]:
        name, density, service, tensile = row[:4]
        upper = name[0].upper() + name[1:]
        add("true", True, f"{upper} can serve continuously up to {service} °C.",
            name, "Service temperature")  # fmt: skip
        add("false: negated", False,
            f"{name[0].upper() + name[1:]} cannot serve continuously up to {service} °C.",
            name, "Service temperature")  # fmt: skip
        add("false: number changed", False,
            _bump(f"The tensile strength of {name} is about {tensile} MPa.", rng),
            name, "Tensile strength")  # fmt: skip
        add("true: GPa", True,
            f"{name[0].upper() + name[1:]} reaches a tensile strength of about {tensile} MPa "
            f"({float(tensile) / 1000:g} GPa).", name, "Tensile strength")  # fmt: skip
        add("false: entity swapped", False,
            f"The tensile strength of {swap(name, 'plastic')} is about {tensile} MPa.",
            name, "Tensile strength")  # fmt: skip
    for row in tables["wood"]:
        name, density = row[:2]
        add("true", True, f"{name[0].upper() + name[1:]} has a density of {density}.",
            name, "Density and hardness")  # fmt: skip
        add("false: entity swapped", False,
            f"{(w := swap(name, 'wood'))[0].upper() + w[1:]} has a density of {density}.",
            name, "Density and hardness")  # fmt: skip
        add("false: number changed", False,
            _bump(f"{name[0].upper() + name[1:]} has a density of {density}.", rng),
            name, "Density and hardness")  # fmt: skip
    for row in tables["adhesive"]:
        name, cure, _gap, _bonds, _strength, temperature = row[:6]
        add("true", True, f"The temperature range of {name}: {temperature}.",
            name, "Temperature range")  # fmt: skip
        add("false: entity swapped", False,
            f"The temperature range of {swap(name, 'adhesive')}: {temperature}.",
            name, "Temperature range")  # fmt: skip
        add("false: negated", False, _negate(f"{name[0].upper() + name[1:]} is {cure}."),
            name, "Cure time")  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entail", action="store_true", help="entailment by the embedded 1.5B")
    parser.add_argument("--show-misses", action="store_true")
    args = parser.parse_args()
    chunks = load_chunks()
    by_id = {c.id: c for c in chunks.values()}
    entail = None
    if args.entail:
        from collective.verdict.entailment import embedded_entailment

        entail = embedded_entailment()
    results: Counter[tuple[str, bool]] = Counter()
    totals: Counter[str] = Counter()
    misses = []
    started = time.perf_counter()
    all_cases = cases(chunks)
    headings = [c.heading for c in chunks.values()]
    for case in all_cases:
        shown = shown_whole(by_id, ids=case.shown)
        claims = check_claims(case.text, shown, entail, names=headings)
        stands = bool(claims) and claims[0].status == "supported" and case.cited in claims[0].cited
        right = stands == case.true
        results[(case.kind, right)] += 1
        totals[case.kind] += 1
        if not right:
            misses.append((case, claims[0] if claims else None))
    elapsed = time.perf_counter() - started
    true_cases = [c for c in all_cases if c.true]
    false_cases = [c for c in all_cases if not c.true]
    kept = sum(results[(k, True)] for k in totals if k.startswith("true"))
    caught = sum(results[(k, True)] for k in totals if k.startswith("false"))
    print(f"{len(all_cases)} cited claims ({len(true_cases)} true, {len(false_cases)} false), "
          f"entailment {'on' if entail else 'off'}, {elapsed:.1f} s")  # fmt: skip
    print(f"{'kind':<40} {'n':>4} {'right':>6}")
    for kind in sorted(totals):
        print(f"{kind:<40} {totals[kind]:>4} {results[(kind, True)] / totals[kind]:>6.1%}")
    print(f"true claims kept:    {kept}/{len(true_cases)} = {kept / len(true_cases):.1%}")
    print(f"false claims caught: {caught}/{len(false_cases)} = {caught / len(false_cases):.1%}")
    if args.show_misses:
        for case, claim in misses:
            status = f"{claim.status}: {claim.reason}" if claim else "no claim"
            print(f"MISS [{case.kind}] {case.text}\n     -> {status}")


if __name__ == "__main__":
    main()
