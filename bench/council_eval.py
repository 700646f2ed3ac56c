"""The bundled eval set: 113 KB-grounded questions, written as `collective eval`'s question file.

Questions come from the fact tables behind `tests/data/eval_kb` (tests/data/generate_eval_kb.py),
never from model output: direct lookups (density, nozzle temperature, Janka hardness),
paraphrases (melting range, bed temperature, "how heavy"), two-hop comparisons of two
entities, and *wide* questions: which of 5-10 named entities ranks first on a property, whose
evidence (one chunk per entity, among their other chunks) exceeds one member's KB section at the
evaluated windows (bench/eval.toml). Each has the numbers a correct answer states (for a
comparison or a wide question: the winner, named first, and its figure, the evidence a reader
needs to trust the pick), and its gold chunks as `SOURCE#HEADING`.

The run, the scoring and the table are `collective eval` (collective.evaluation); `make eval`
runs it on this set with bench/eval.toml. This script only (re)writes the set:

    .venv/bin/python bench/council_eval.py            # writes tests/data/eval_questions.jsonl
    .venv/bin/python bench/council_eval.py --check    # fails if the file is stale
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
QUESTIONS = DATA / "eval_questions.jsonl"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(DATA))

import generate_eval_kb as facts  # noqa: E402

from collective.evaluation.questions import EvalQuestion  # noqa: E402
from collective.evaluation.scoring import numbers_in as _numbers  # noqa: E402


def _question(
    qid: str,
    kind: str,
    text: str,
    numbers: list[float] | None = None,
    *,
    winner: str = "",
    loser: str = "",
    entities: list[str] | None = None,
    gold: list[str],
) -> EvalQuestion:
    """A question of the set (comparisons list their two entities in the question's order)."""
    if loser:
        entities = [n for n in (winner, loser) if n]
        entities.sort(key=text.find)
    return EvalQuestion(
        id=qid,
        question=text,
        numbers=tuple(numbers or ()),
        entity=winner,
        entities=tuple(entities or ()),
        gold_chunks=tuple(gold),
        kind=kind,
    )


def _rows(table: str, category: str) -> list[dict[str, Any]]:
    return [
        {"name": row[0], "row": row, "file": f"{category}/{facts.slug(row[0])}.md"}
        for row in facts._table(table)
    ]


def build_questions() -> list[EvalQuestion]:
    """The QA set from the fact tables (deterministic order: kinds interleaved)."""
    metals = _rows(facts.METALS, "metal")
    filaments = _rows(facts.FILAMENTS, "filament")
    woods = [w for w in _rows(facts.WOODS, "wood") if "Janka" in w["row"][1]]
    direct: list[EvalQuestion] = []
    para: list[EvalQuestion] = []
    comp: list[EvalQuestion] = []

    def gold(entity: dict[str, Any], section: str) -> str:
        return f"{entity['file']}#{section}"

    def janka(row: list[str]) -> list[float]:
        return _numbers(row[1].split("Janka")[1])

    # (kind, entities, id prefix, question, the numbers a correct answer states, gold section)
    facts_asked = [
        ("direct", metals, "density", "What is the density of {}?",
         lambda row: [float(row[1])], "Density and melting range"),
        ("paraphrase", metals, "melting", "At roughly what temperature does {} turn liquid?",
         lambda row: _numbers(row[2]), "Density and melting range"),
        ("direct", filaments, "nozzle", "What nozzle temperature does {} print at?",
         lambda row: _numbers(row[1]), "Print temperatures"),
        ("paraphrase", filaments, "bed", "How warm should the build plate be when printing {}?",
         lambda row: _numbers(row[2]), "Print temperatures"),
        ("direct", woods, "janka", "What is the Janka hardness of {}?",
         janka, "Density and hardness"),
    ]  # fmt: skip
    for kind, entities, prefix, template, numbers, section in facts_asked:
        (direct if kind == "direct" else para).extend(
            _question(
                f"{prefix}-{facts.slug(e['name'])}",
                kind,
                template.format(e["name"]),
                numbers(e["row"]),
                gold=[gold(e, section)],
            )
            for e in entities
        )

    def pairs(
        prefix: str, items: list[dict[str, Any]], value, section: str, template: str, n: int
    ) -> None:
        rng = random.Random(17)
        seen = set()
        while sum(q.id.startswith(prefix) for q in comp) < n:
            a, b = rng.sample(items, 2)
            key = frozenset((a["name"], b["name"]))
            if key in seen or value(a) == value(b):
                continue
            seen.add(key)
            win, lose = (a, b) if value(a) > value(b) else (b, a)
            comp.append(
                _question(
                    f"{prefix}-{facts.slug(a['name'])}-vs-{facts.slug(b['name'])}",
                    "comparison",
                    template.format(a=a["name"], b=b["name"]),
                    [value(win)],
                    winner=win["name"],
                    loser=lose["name"],
                    gold=[gold(a, section), gold(b, section)],
                )
            )

    pairs("denser", metals, lambda e: float(e["row"][1]), "Density and melting range",
          "Which is denser, {a} or {b}?", 7)  # fmt: skip
    pairs("harder", woods, lambda e: janka(e["row"])[0], "Density and hardness",
          "Which wood is harder on the Janka scale, {a} or {b}?", 6)  # fmt: skip
    pairs("hotter", filaments, lambda e: _numbers(e["row"][1])[0], "Print temperatures",
          "Which needs the hotter nozzle to print, {a} or {b}?", 7)  # fmt: skip
    out: list[EvalQuestion] = []
    groups = [direct, para, comp, wide_questions()]
    while any(groups):
        for group in groups:
            if group:
                out.append(group.pop(0))
    return out


# (id prefix, category, table, section, value of a row, question, "highest" or "lowest")
WIDE = [
    ("densest", "metal", facts.METALS, "Density and melting range", lambda r: float(r[1]),
     "Which of these metals has the highest density: {}?", "highest"),
    ("hottest-nozzle", "filament", facts.FILAMENTS, "Print temperatures",
     lambda r: _numbers(r[1])[0],
     "Which of these filaments needs the highest nozzle temperature: {}?", "highest"),
    ("coolest-nozzle", "filament", facts.FILAMENTS, "Print temperatures",
     lambda r: _numbers(r[1])[0],
     "Which of these filaments prints at the lowest nozzle temperature: {}?", "lowest"),
    ("hardest-wood", "wood", [r for r in facts._table(facts.WOODS) if "Janka" in r[1]],
     "Density and hardness", lambda r: _numbers(r[1].split("Janka")[1])[0],
     "Which of these woods has the highest Janka hardness: {}?", "highest"),
    ("lightest-plastic", "plastic", facts.PLASTICS, "Density", lambda r: float(r[1]),
     "Which of these plastics has the lowest density: {}?", "lowest"),
    ("hottest-plastic", "plastic", facts.PLASTICS, "Service temperature", lambda r: float(r[2]),
     "Which of these plastics has the highest continuous service temperature: {}?", "highest"),
    ("strongest-plastic", "plastic", facts.PLASTICS, "Tensile strength", lambda r: float(r[3]),
     "Which of these plastics has the highest tensile strength: {}?", "highest"),
]  # fmt: skip
WIDE_PER_PROPERTY = 4


def wide_questions() -> list[EvalQuestion]:
    """Which of 5-10 named entities ranks first on a property (a unique winner each).

    Gold chunks: every listed entity's chunk for the property (ranking needs them all).
    """
    out: list[EvalQuestion] = []
    rng = random.Random(29)
    for prefix, category, table, section, value, template, order in WIDE:
        rows = facts._table(table) if isinstance(table, str) else table
        made, winners = 0, []
        while made < WIDE_PER_PROPERTY:
            picked = rng.sample(rows, rng.randint(5, min(10, len(rows))))
            values = sorted((value(r) for r in picked), reverse=order == "highest")
            best = next(r for r in picked if value(r) == values[0])
            if values[0] == values[1] or winners.count(best[0]) >= 2:
                continue  # no unique winner, or the same winner again and again
            winners.append(best[0])
            names = [r[0] for r in picked]
            made += 1
            out.append(
                _question(
                    f"{prefix}-{made}",
                    "wide",
                    template.format(", ".join(names[:-1]) + " or " + names[-1]),
                    [values[0]],
                    winner=best[0],
                    entities=names,
                    gold=[f"{category}/{facts.slug(n)}.md#{section}" for n in names],
                )
            )
    return out


def subset(questions: list[EvalQuestion], n: int) -> list[EvalQuestion]:
    """`n` questions spread evenly over the interleaved set (every kind represented)."""
    if n >= len(questions):
        return questions
    step = len(questions) / n
    return [questions[int(i * step)] for i in range(n)]


def jsonl(questions: list[EvalQuestion]) -> str:
    """The question file's text."""
    return "".join(json.dumps(q.to_dict(), ensure_ascii=False) + "\n" for q in questions)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    parser.add_argument("--questions", type=int, help="an evenly spread subset of N questions")
    parser.add_argument("--out", type=Path, default=QUESTIONS)
    args = parser.parse_args(argv)
    questions = build_questions()
    if args.questions:
        questions = subset(questions, args.questions)
    text = jsonl(questions)
    if args.check:
        if args.out.read_text(encoding="utf-8") != text:
            sys.exit(f"{args.out} is stale: run bench/council_eval.py")
        return
    args.out.write_text(text, encoding="utf-8")
    print(f"{len(questions)} questions -> {args.out}")


if __name__ == "__main__":
    main()
