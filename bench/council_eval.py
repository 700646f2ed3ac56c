"""Does the council help? Five ways to answer, on one KB-grounded QA set, in one run.

Questions come from the fact tables behind `tests/data/eval_kb` (tests/data/generate_eval_kb.py),
never from model output: direct lookups (density, nozzle temperature, Janka hardness),
paraphrases (melting range, bed temperature, "how heavy"), two-hop comparisons of two
entities, and *wide* questions: which of 5-10 named entities ranks first on a property, whose
evidence (one chunk per entity, among their other chunks) exceeds one member's KB section at the
evaluated windows. Each has the numbers (or the entity) a correct answer states, and its gold
chunk ids.

Arms (collective.modes, the council's own nodes; K = 3; judge without KB tools so that arms 2-5
make equal calls, K+1, plus one judge call where it fixes a claim its chunk does not support):

1. `single`: the best model (the judge's, Qwen2.5-Coder 1.5B), one call, the top chunks that fit;
2. `self-consistency`: K+1 samples of it, the most consistent answer;
3. `self-moa`: K samples of it + its judge;
4. `council`: the default council (K Qwen 0.5B specialists at temperatures 0.2/0.5/0.8) + judge,
   every member reading the same chunks (shared evidence);
5. `council-split`: 4 with split evidence (a shared head plus each member's own slice);
6. `council-review` (on request): 4 plus the peer-review round (2K+1 calls).

The evaluated windows (`WINDOWS`) are small on purpose: a specialist's KB section holds about 8
chunks, the judge's about 10 plus the evidence its members cite, and retrieval hands over up to
24 candidates (deep). Caps: specialists 128 output tokens, the judge 192.

Scoring: correct when the answer states every gold number (a comparison or a wide question:
names the right entity first, restated lists aside); an answer that parrots the prompt or raw KB
lines (`[Score: ...]`, section headers, the system prompt) is wrong. Accuracy and evidence recall
(the share of gold chunks the answer's citations cover) get paired bootstrap 95% CIs of their
difference to the first arm; citation precision (cited chunks that are gold), the share of cited
claims their chunk supports, unknown citations, prompt and output tokens, model calls and wall
time are per question. Summaries are given for all questions, the wide ones and the rest.

Run: .venv/bin/python bench/council_eval.py [--questions N] [--kinds wide] [--arms ...] [--json]
(`make eval` runs every question and arm; see bench/README.md.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(DATA))

import generate_eval_kb as facts  # noqa: E402

from collective.graph.context import CouncilContext  # noqa: E402
from collective.kb.sqlite_store import SqliteKnowledgeStore  # noqa: E402
from collective.models.registry import close_all  # noqa: E402
from collective.modes import MODES, ModeResult, run_mode  # noqa: E402

NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
PARROT = ("[Score:", "## Knowledge base", "## Task", "You are the judge", "You are specialist")


@dataclass
class Question:
    """One question, what a correct answer states, and the chunks that hold it."""

    id: str
    kind: str  # direct, paraphrase, comparison, wide
    text: str
    numbers: list[float] = field(default_factory=list)
    """Every one must appear in a correct answer."""
    winner: str = ""
    loser: str = ""
    """Comparisons: the answer must name `winner` before (or instead of) `loser`."""
    entities: list[str] = field(default_factory=list)
    """Wide questions: the entities listed; the answer must name `winner` first among them."""
    gold: list[str] = field(default_factory=list)
    """Gold chunk ids."""


def _numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER.findall(text.replace("–", "-"))]


def _rows(table: str, sections: list[tuple[str, str]], category: str) -> list[dict[str, Any]]:
    out = []
    for row in facts._table(table):
        out.append({"name": row[0], "row": row, "file": f"{category}/{facts.slug(row[0])}.md"})
    return out


def build_questions(by_ref: dict[tuple[str, str], str]) -> list[Question]:
    """The QA set from the fact tables (deterministic order: kinds interleaved)."""
    metals = _rows(facts.METALS, facts.METAL_SECTIONS, "metal")
    filaments = _rows(facts.FILAMENTS, facts.FILAMENT_SECTIONS, "filament")
    woods = [w for w in _rows(facts.WOODS, facts.WOOD_SECTIONS, "wood") if "Janka" in w["row"][1]]
    direct: list[Question] = []
    para: list[Question] = []
    comp: list[Question] = []

    def gold(entity: dict[str, Any], section: str) -> str:
        return by_ref[(entity["file"], section)]

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
            Question(
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
                Question(
                    f"{prefix}-{facts.slug(a['name'])}-vs-{facts.slug(b['name'])}",
                    "comparison",
                    template.format(a=a["name"], b=b["name"]),
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
    out: list[Question] = []
    groups = [direct, para, comp, wide_questions(by_ref)]
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


def wide_questions(by_ref: dict[tuple[str, str], str]) -> list[Question]:
    """Which of 5-10 named entities ranks first on a property (a unique winner each).

    Gold chunks: every listed entity's chunk for the property (ranking needs them all).
    """
    out: list[Question] = []
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
                Question(
                    f"{prefix}-{made}",
                    "wide",
                    template.format(", ".join(names[:-1]) + " or " + names[-1]),
                    winner=best[0],
                    entities=names,
                    gold=[by_ref[(f"{category}/{facts.slug(n)}.md", section)] for n in names],
                )
            )
    return out


def aliases(name: str) -> list[str]:
    """Ways an answer may name an entity: its name, without a parenthesis or a stock form
    (`PEEK rod` -> `PEEK`), and a first word that is a code (`6061-T6`, `PA6`, `C360`)."""
    out = [name, re.sub(r"\s*\(.*?\)", "", name)]
    out.append(re.sub(r"\s+(sheet|rod|nylon|aluminium|stainless steel|tool steel)$", "", name))
    first = name.split()[0]
    if any(ch.isdigit() for ch in first) or sum(ch.isupper() for ch in first) >= 2:
        out.append(first)
    return [a.lower() for a in dict.fromkeys(out) if a]


_JOIN = re.compile(r"\s*(?:,\s*)?(?:(?:or|and)\s+)?")


def _first_named(answer: str, entities: list[str]) -> str | None:
    """The entity an answer names first; a restated list (three or more of the names in the
    question's order, joined by commas, "or", "and") names none."""
    low = answer.lower()
    forms = sorted(((a, e) for e in entities for a in aliases(e)), key=lambda t: -len(t[0]))
    entity = dict(forms)
    one = rf"(?<![\w-])(?:{'|'.join(re.escape(a) for a, _ in forms)})(?![\w-])"
    hits = list(re.finditer(one, low))
    i = 0
    while i < len(hits):
        j = i
        while (
            j + 1 < len(hits)
            and _JOIN.fullmatch(low[hits[j].end() : hits[j + 1].start()])
            and entities.index(entity[hits[j + 1].group(0)])
            > entities.index(entity[hits[j].group(0)])
        ):
            j += 1
        if j - i < 2:  # not a restated list
            return entity[hits[i].group(0)]
        i = j + 1
    return None


def is_parrot(answer: str) -> bool:
    """An answer that echoes the prompt or raw KB lines instead of answering."""
    return any(marker in answer for marker in PARROT)


def score(question: Question, answer: str) -> bool:
    """Whether `answer` states what a correct answer states (and does not parrot)."""
    if not answer.strip() or is_parrot(answer):
        return False
    if question.kind == "wide":
        return _first_named(answer, question.entities) == question.winner
    if question.kind == "comparison":
        names = "|".join(re.escape(n.lower()) for n in (question.winner, question.loser))
        # "between A and B", "A or B": a restated pair names no winner
        pair = rf"(?:{names})\s*,?\s*(?:or|and|vs\.?|versus)\s*(?:{names})"
        low = re.sub(pair, " ", answer.lower())
        win, lose = low.find(question.winner.lower()), low.find(question.loser.lower())
        return win >= 0 and (lose < 0 or win < lose)
    stated = _numbers(answer)
    return all(any(abs(n - gold) < 1e-9 for n in stated) for gold in question.numbers)


def bootstrap_diff(
    a: list[bool] | list[float], b: list[bool] | list[float], rounds: int = 2000
) -> tuple[float, float]:
    """Paired bootstrap 95% CI of mean(a) - mean(b) over the same questions."""
    rng = random.Random(0)
    n = len(a)
    diffs = []
    for _ in range(rounds):
        idx = [rng.randrange(n) for _ in range(n)]
        diffs.append(sum(a[i] - b[i] for i in idx) / n)
    diffs.sort()
    return diffs[int(0.025 * rounds)], diffs[int(0.975 * rounds) - 1]


def open_kb(tmp: Path) -> tuple[Path, dict[tuple[str, str], str]]:
    """The eval KB ingested as the council will read it, and (file, section) -> chunk id."""
    path = tmp / "eval.sqlite"
    store = SqliteKnowledgeStore(path)
    store.add_paths([DATA / "eval_kb"], base=DATA)
    by_ref = {
        (c.source.removeprefix("eval_kb/"), c.heading.split(" > ")[-1]): c.id for c in store.list()
    }
    store.close()
    return path, by_ref


WINDOWS: dict[str, dict[str, Any]] = {
    "specialist": {
        "n_ctx": 4096,
        "output": 512,
        "sections": {"system": 200, "kb_chunks": 300, "task": 160, "safety_margin": 64},
    },
    "judge": {
        "n_ctx": 8192,
        "output": 512,
        "sections": {
            "system": 260,
            "kb_chunks": 360,
            "proposals": 480,
            "evidence": 480,
            "task": 160,
            "safety_margin": 96,
        },
    },
}
"""The evaluated windows: small KB sections (a specialist's holds about 8 chunks), so that a
wide question's evidence exceeds one member's and splitting it can matter. Outputs are capped
by `--specialist-cap` / `--judge-cap`."""


def context(kb: Path, caps: dict[str, int], k: int) -> CouncilContext:
    """The default council's settings (its judge is the best model) on the eval KB."""
    return CouncilContext(
        k=k,
        kb=str(kb),
        retrieval="deep",
        max_inject=24,
        budgets=WINDOWS,
        evidence="shared",  # the council arm reads shared evidence; council-split splits
        output_caps=caps,
        usage_log=None,
    )


async def run(
    questions: list[Question],
    arms: list[str],
    ctx: CouncilContext,
    log=print,
    rows_file: Path | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Every arm on every question (arms interleaved per question, so load hits all alike).

    Each row is also appended to `rows_file` (JSON lines) as it is made: a long run that is cut
    short can still be summarised (`--summarise`).
    """
    rows: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for number, question in enumerate(questions, 1):
        for arm in arms:
            result: ModeResult = await run_mode(question.text, arm, ctx)  # type: ignore[arg-type]
            cited = {c["id"] for c in result.citations}
            gold = set(question.gold)
            row = {
                "question": question.id,
                "kind": question.kind,
                "correct": score(question, result.answer),
                "parrot": is_parrot(result.answer),
                "precision": len(cited & gold) / len(cited) if cited else 0.0,
                "recall": len(cited & gold) / len(gold),
                "gold_supplied": len(gold & set(result.supplied)) / len(gold),
                "gold_seen": len(gold & set(result.seen)) / len(gold),
                "evidence": result.evidence.get("applied", ""),
                "support": result.citation_support,
                "unknown": len(result.unknown_citations),
                "calls": result.calls,
                "prompt_tokens": result.prompt_tokens,
                "output_tokens": result.output_tokens,
                "wall_s": round(result.wall_s, 2),
                "answer": result.answer,
            }
            rows[arm].append(row)
            if rows_file is not None:
                with rows_file.open("a", encoding="utf-8") as sink:
                    sink.write(json.dumps({"arm": arm, **row}) + "\n")
            log(
                f"[{number}/{len(questions)}] {arm:16} {'ok ' if row['correct'] else 'BAD'} "
                f"{row['wall_s']:6.1f}s {question.text} -> {result.answer[:80]!r}"
            )
    return rows


def summarise(rows: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per arm: accuracy and evidence recall with CIs against the first arm, citations, cost."""
    first = next(iter(rows.values()))
    out = {}
    for arm, arm_rows in rows.items():
        correct = [r["correct"] for r in arm_rows]
        recall = [r["recall"] for r in arm_rows]
        low, high = bootstrap_diff(correct, [r["correct"] for r in first])
        r_low, r_high = bootstrap_diff(recall, [r["recall"] for r in first])
        supports = [r["support"] for r in arm_rows if r.get("support") is not None]
        out[arm] = {
            "n": len(arm_rows),
            "accuracy": sum(correct) / len(correct),
            "diff_vs_first_ci95": [round(low, 3), round(high, 3)],
            "citation_precision": statistics.mean(r["precision"] for r in arm_rows),
            "citation_recall": statistics.mean(recall),
            "recall_diff_vs_first_ci95": [round(r_low, 3), round(r_high, 3)],
            "gold_seen": statistics.mean(r.get("gold_seen", 0.0) for r in arm_rows),
            "citation_support": statistics.mean(supports) if supports else None,
            "unknown_citations": sum(r["unknown"] for r in arm_rows),
            "parrots": sum(r["parrot"] for r in arm_rows),
            "calls_per_q": statistics.mean(r["calls"] for r in arm_rows),
            "prompt_tokens_per_q": statistics.mean(r["prompt_tokens"] for r in arm_rows),
            "output_tokens_per_q": statistics.mean(r["output_tokens"] for r in arm_rows),
            "wall_s_per_q": statistics.mean(r["wall_s"] for r in arm_rows),
        }
    return out


def groups(rows: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The rows of all questions, of the wide ones and of the rest (groups with rows only)."""
    out = {"all": rows}
    for name, wide in (("wide", True), ("narrow", False)):
        picked = {a: [r for r in rs if (r.get("kind") == "wide") == wide] for a, rs in rows.items()}
        if all(picked.values()) and picked != rows:
            out[name] = picked
    return out


def completed(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Rows of a rows file, per arm, for the questions that every arm in it finished."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    arms = list(dict.fromkeys(row["arm"] for row in lines))
    done = [
        q
        for q in dict.fromkeys(row["question"] for row in lines)
        if all(any(r["arm"] == a and r["question"] == q for r in lines) for a in arms)
    ]
    return {
        a: [r for q in done for r in lines if r["arm"] == a and r["question"] == q] for a in arms
    }


def table(summary: dict[str, dict[str, Any]]) -> str:
    """The summary as a Markdown table."""
    lines = [
        "| arm | n | accuracy | diff vs first (95% CI) | evidence recall | recall diff (95% CI) | "
        "cit. precision | claims supported | unknown cit. | calls/q | prompt tok/q | "
        "output tok/q | wall s/q |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, s in summary.items():
        low, high = s["diff_vs_first_ci95"]
        r_low, r_high = s.get("recall_diff_vs_first_ci95", [0.0, 0.0])
        support = s.get("citation_support")
        lines.append(
            f"| {arm} | {s['n']} | {s['accuracy']:.2f} | [{low:+.2f}, {high:+.2f}] | "
            f"{s['citation_recall']:.2f} | [{r_low:+.2f}, {r_high:+.2f}] | "
            f"{s['citation_precision']:.2f} | {'-' if support is None else f'{support:.2f}'} | "
            f"{s['unknown_citations']} | {s['calls_per_q']:.1f} | "
            f"{s['prompt_tokens_per_q']:.0f} | {s['output_tokens_per_q']:.0f} | "
            f"{s['wall_s_per_q']:.1f} |"
        )
    return "\n".join(lines)


def tables(rows: dict[str, list[dict[str, Any]]]) -> str:
    """One table per group of questions (all, wide, narrow)."""
    return "\n\n".join(
        f"{name} questions:\n\n{table(summarise(group))}" for name, group in groups(rows).items()
    )


DEFAULT_ARMS = ["single", "self-consistency", "self-moa", "council", "council-split"]
"""The arms `make eval` runs (council-review on request: it costs 2K+1 calls)."""


def subset(questions: list[Question], n: int) -> list[Question]:
    """`n` questions spread evenly over the interleaved set (every kind represented)."""
    if n >= len(questions):
        return questions
    step = len(questions) / n
    return [questions[int(i * step)] for i in range(n)]


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    caps = {"specialist": args.specialist_cap, "judge": args.judge_cap}
    with tempfile.TemporaryDirectory() as tmp:
        kb, by_ref = open_kb(Path(tmp))
        questions = build_questions(by_ref)
        if args.ids:
            questions = [q for q in questions if q.id in args.ids]
        if args.kinds:
            questions = [q for q in questions if q.kind in args.kinds]
        questions = subset(questions, args.questions)
        ctx = context(kb, caps, args.k)
        started = time.perf_counter()
        try:
            rows = await run(
                questions, args.arms, ctx, lambda s: print(s, file=sys.stderr), args.rows
            )
        finally:
            await close_all()
        wall = time.perf_counter() - started
    summary = {name: summarise(group) for name, group in groups(rows).items()}
    return {"questions": len(questions), "wall_s": round(wall, 1), "summary": summary, "rows": rows}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=10_000, help="evenly spread subset")
    parser.add_argument("--arms", type=lambda s: s.split(","), default=DEFAULT_ARMS)
    parser.add_argument(
        "--kinds", type=lambda s: s.split(","), help="only these kinds (direct, ..., wide)"
    )
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--specialist-cap", type=int, default=128)
    parser.add_argument("--judge-cap", type=int, default=192)
    parser.add_argument("--json", action="store_true", help="print everything as JSON")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--ids", type=lambda s: s.split(","), help="only these question ids")
    parser.add_argument("--rows", type=Path, help="append each row here as it is made (JSONL)")
    parser.add_argument(
        "--summarise", type=Path, help="only summarise a rows file (questions every arm finished)"
    )
    args = parser.parse_args(argv)
    if args.summarise:
        with tempfile.TemporaryDirectory() as tmp:
            by_id = {q.id: q for q in build_questions(open_kb(Path(tmp))[1])}
        rows = completed(args.summarise)
        for arm_rows in rows.values():  # scored again: the scoring may have been fixed since
            for row in arm_rows:
                row["correct"] = score(by_id[row["question"]], row["answer"])
                row.setdefault("kind", by_id[row["question"]].kind)
        print(tables(rows))
        return
    unknown = [a for a in args.arms if a not in MODES]
    if unknown:
        parser.error(f"unknown arm(s) {unknown}; use {','.join(MODES)}")
    result = asyncio.run(main_async(args))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{result['questions']} questions, {result['wall_s']} s in all")
    print(tables(result["rows"]))
    best = max(result["summary"]["all"].items(), key=lambda kv: kv[1]["accuracy"])
    print(f"most accurate: {best[0]} ({best[1]['accuracy']:.2f})")


if __name__ == "__main__":
    main()
