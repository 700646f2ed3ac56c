"""How far retrieval's first chunk leads the next, and whether it is a gold chunk.

    python bench/first_chunk_margins.py tests/data/eval_questions.jsonl [--kb EVAL_KB]

Retrieval as the bundled eval runs it (bench/eval.toml). Per band of the first chunk's lead over
the second, of the questions about one thing (direct and paraphrased), how many there are and in
how many the first chunk is one of the question's gold chunks: the data `WIDE_MARGIN`
(collective/verdict/lines.py) rests on.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from collective.graph.context import open_knowledge
from collective.kb.retrieval import retrieve
from collective.session import load_settings

BANDS = [(0.0, 0.05), (0.05, 0.1), (0.1, 0.15), (0.15, 0.2), (0.2, 1.01)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions", type=Path)
    parser.add_argument("--kb", default=".collective/eval_kb.sqlite")
    parser.add_argument("--config", type=Path, default=Path("bench/eval.toml"))
    args = parser.parse_args()
    ctx = load_settings(args.config, {"kb": args.kb}).config.council_context()
    kb = open_knowledge(ctx)
    leads: list[tuple[float, bool]] = []
    for line in args.questions.read_text().splitlines():
        q = json.loads(line)
        if q["kind"] not in ("direct", "paraphrase") or not q.get("gold_chunks"):
            continue
        found = retrieve(
            kb,
            q["question"],
            ctx.retrieval,
            max_inject=ctx.max_inject,
            rerank=ctx.rerank,
            synonyms_file=ctx.synonyms,
            auto=ctx.retrieval_auto,
        )
        first, second = sorted(found.injected, key=lambda c: -c.score)[:2]
        where = f"{Path(first.source).parent.name}/{Path(first.source).name}"
        gold = f"{where}#{first.heading.split(' > ')[-1]}" in q["gold_chunks"]
        leads.append((first.score - second.score, gold))
        if not gold:
            print(f"first not gold, ahead by {first.score - second.score:.2f}: {q['question']}")
    print("lead of the first chunk   questions   first is gold")
    for low, high in BANDS:
        band = [gold for lead, gold in leads if low <= lead < high]
        print(f"{low:.2f}-{min(high, 1):.2f}                 {len(band):>9}   {sum(band):>13}")


if __name__ == "__main__":
    main()
