"""Tiered memory over a long synthetic session: active context stays bounded, compression is cheap.

A 200-task session (default) runs through `TieredMemory` at its default capacities (L0 8,000,
L1 32,000 tokens), counted exactly with tiktoken's cl100k_base. Each task has a description,
6-12 turns of 40-260 tokens, and half the time a key decision. After every step the bench
records L0 + L1 (the active context) and the uncompressed history (every turn, task and
decision as recorded).

It prints the maximum active context (the goal: under 40,000 tokens from start to end), the
uncompressed history's growth, compression metrics per tier, and the time per compression
relative to one counting pass of the text that compression produced (the counter's raw
tokenizer, no memo), all measured in this run.

Run: .venv/bin/python bench/memory.py [--tasks N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from langgraph.store.memory import InMemoryStore

from collective.budget.counting import tiktoken_counter
from collective.memory import TieredMemory

VOCAB = (
    "the a we it this that service cache queue parser schema index replica shard lease token "
    "login session retry timeout latency throughput budget context window model judge planner "
    "specialist chunk citation store backend request response error failure fix test build "
    "deploy config flag migration rollback metric trace span log alert threshold policy user "
    "team review change patch branch release version api endpoint database table column key "
    "value memory tier summary decision question artifact file module function class method"
).split()
VERBS = "is uses needs returns breaks fixes adds drops moves caches retries checks logs".split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(VOCAB) for _ in range(rng.randint(5, 9))]
    words.insert(2, rng.choice(VERBS))
    if rng.random() < 0.3:
        words.append(str(rng.randint(2, 9_999)))
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random, tokens: int) -> str:
    out: list[str] = []
    while len(out) * 11 < tokens:  # about 11 tokens per sentence
        out.append(sentence(rng))
    return " ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    counter = tiktoken_counter("cl100k_base")
    rng = random.Random(args.seed)
    memory = TieredMemory(counter, InMemoryStore())
    uncompressed = 0
    max_active, max_l0, max_l1 = 0, 0, 0
    growth: list[tuple[int, int, int]] = []
    timings: list[tuple[str, float, float]] = []  # tier, compression s, counting pass s
    seen = {"L0": 0, "L1": 0}
    turns = 0
    start = time.perf_counter()

    def step(text: str) -> None:
        nonlocal uncompressed, max_active, max_l0, max_l1
        uncompressed += counter.count(text)
        l0, l1 = memory.l0_tokens(), memory.l1_tokens()
        max_l0, max_l1, max_active = max(max_l0, l0), max(max_l1, l1), max(max_active, l0 + l1)
        for tier, metrics in (("L0", memory.metrics.l0), ("L1", memory.metrics.l1)):
            if metrics.compressions != seen[tier]:
                seen[tier] = metrics.compressions
                record = memory.last_compression
                assert record is not None
                t0 = time.perf_counter()
                counter._count(record.output)  # one raw counting pass, no memo
                timings.append((tier, record.seconds, time.perf_counter() - t0))

    for n in range(1, args.tasks + 1):
        task = f"T{n}"
        description = f"Task {n}: " + sentence(rng)
        memory.begin_task(task, description)
        step(description)
        for _ in range(rng.randint(6, 12)):
            role = "user" if turns % 2 == 0 else "assistant"
            text = paragraph(rng, rng.randint(40, 260))
            memory.add_turn(role, text)
            turns += 1
            step(f"{role}: {text}")
        if rng.random() < 0.5:
            decision = f"Decision {n}: " + sentence(rng)
            memory.record_decision(decision)
            step(decision)
        outcome = sentence(rng)
        memory.complete_task(task, outcome)
        step(outcome)
        if n % 25 == 0:
            growth.append((n, uncompressed, memory.l0_tokens() + memory.l1_tokens()))
    elapsed = time.perf_counter() - start

    usage, metrics = memory.usage(), memory.metrics.to_dict()
    print(f"session: {args.tasks} tasks, {turns} turns, counter {counter.kind}, {elapsed:.2f} s")
    print(f"max active context (L0 + L1): {max_active} tokens (goal < 40,000)")
    print(f"  max L0 {max_l0} / 8,000; max L1 {max_l1} / 32,000")
    print(
        f"uncompressed history at the end: {uncompressed} tokens ({uncompressed / max_active:.1f}x)"
    )
    print("  tasks  uncompressed  active")
    for n, full, active in growth:
        print(f"  {n:5d}  {full:12d}  {active:6d}")
    for tier in ("L0", "L1"):
        m = metrics[tier]
        before, after = m["tokens_before"], m["tokens_after"]
        print(
            f"{tier}: {m['compressions']} compressions, {before} -> {after} "
            f"tokens (ratio {m['ratio']:.3f}, saved {m['tokens_saved']})"
        )
        own = [(c, k) for t, c, k in timings if t == tier]
        if own:
            ratios = [c / k for c, k in own]
            median_ms = statistics.median(c for c, _ in own) * 1e3
            print(
                f"  time per compression: median {median_ms:.2f} ms"
                f" = {statistics.median(ratios):.1f}x one counting pass of its output "
                f"(median {statistics.median(k for _, k in own) * 1e3:.2f} ms); "
                f"mean {statistics.fmean(ratios):.1f}x"
            )
    l2 = metrics["L2"]
    print(f"L2: {l2['archived']} episodes archived ({l2['archived_tokens']} tokens)")
    print(
        f"at the end: L0 {usage['L0']['tokens']:.0f} ({usage['L0']['pct']:.1f}%), "
        f"L1 {usage['L1']['tokens']:.0f} ({usage['L1']['pct']:.1f}%), "
        f"{len(memory.decisions)} decisions pinned"
    )
    assert max_active < 40_000, "active context passed 40,000 tokens"


if __name__ == "__main__":
    main()
