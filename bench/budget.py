"""Benchmark: fitting a judge prompt costs little more than counting its candidates once.

Fits a judge prompt (131,072 context, the 128K preset) from 400 KB chunks totalling about
1M tokens plus three 8K-token proposals, and compares the whole fit with one plain tokenizer
pass over all candidate text, in the same run with the same encoding. Goal: ratio <= 1.3.
"""

from __future__ import annotations

import random
import statistics
import time

from rich.console import Console

from collective.budget.assembly import assemble, chunks_section, labelled_section, text_section
from collective.budget.counting import _tiktoken_encoding, tiktoken_counter
from collective.budget.plans import JUDGE_PRESET
from collective.budget.trimming import Scored
from collective.commands.render import budget_table

ENCODING = "o200k_harmony"
VOCAB = (
    "filament nozzle extruder temperature adhesion warping enclosure humidity dryer "
    "polymer glass transition layer shrinkage tensile strength impact creep annealing "
    "PLA PETG ABS ASA TPU nylon polycarbonate carbon fiber abrasive hardened steel "
    "the a of to and in is that for with as on by this be are"
).split()


def make_text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n_words)) + "."


def compose(sections):
    system = sections["system"]
    user = "\n\n".join(f"## {k}\n{v}" for k, v in sections.items() if k != "system" and v)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def main(repeats: int = 5) -> None:
    rng = random.Random(7)
    chunks = [Scored(f"mem_{i}", make_text(rng, 2_000), rng.random()) for i in range(400)]
    proposals = [(f"Proposal {i}", make_text(rng, 7_200)) for i in range(3)]
    candidates = [c.text for c in chunks] + [p for _, p in proposals]
    enc = _tiktoken_encoding(ENCODING)
    total_tokens = sum(len(t) for t in enc.encode_ordinary_batch(candidates, num_threads=2))

    plain, fit = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        enc.encode_ordinary_batch(candidates, num_threads=2)
        plain.append(time.perf_counter() - start)

        counter = tiktoken_counter(ENCODING)  # a fresh counter: nothing memoised yet
        start = time.perf_counter()
        result = assemble(
            JUDGE_PRESET,
            counter,
            [
                text_section("system", "You are the judge of a council."),
                text_section("task", "Which material survives a hot car?"),
                chunks_section("kb_chunks", chunks),
                labelled_section("proposals", proposals),
            ],
            compose,
            node="judge",
            model="gpt-oss-120b",
        )
        fit.append(time.perf_counter() - start)
        assert result.report.fits

    p, f = statistics.median(plain), statistics.median(fit)
    print(f"candidates: {len(candidates)} texts, {total_tokens:,} tokens ({ENCODING})")
    print(f"prompt: {result.report.prompt_tokens:,} tokens of n_ctx {result.report.n_ctx:,}")
    Console().print(budget_table([result.report.to_dict()]))
    print(f"plain tokenizer pass: {p * 1000:.0f} ms (median of {repeats})")
    print(f"whole fit:            {f * 1000:.0f} ms (median of {repeats})")
    print(f"ratio fit/plain:      {f / p:.2f}  (goal <= 1.3)")


if __name__ == "__main__":
    main()
