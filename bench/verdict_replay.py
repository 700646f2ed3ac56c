"""The verdict's rules measured on recorded model answers: record once, replay in seconds.

    python bench/verdict_replay.py record RECORDING QUESTIONS... [--kb EVAL_KB]
    python bench/verdict_replay.py replay RECORDING QUESTIONS... [--out ROWS] [--ids ID ...]

`record` answers each question as `collective eval --arms single,self-moa` does
(`collective.modes.run_arms`, bench/eval.toml) and keeps, per question, the state the default's
verdict starts from: retrieval's chunks, the judge's own answer (checked) and the samples'
answers. It resumes: a question already recorded is skipped. `replay` rules again on that state
with this checkout's verdict code, as one call (the judge's own answer alone) and as the
default (its samples too): no model is called, so a change to the verdict's rules is measured
on the same model answers, and both arms' verdicts are scored (`collective.evaluation.score`)
and written as JSON lines. A change to how models are asked (their prompts, sampling) needs a
new recording. The recording is a pickle of this checkout's own state: read only recordings
you made.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
from pathlib import Path
from typing import Any

import collective.modes as modes
from collective.evaluation.questions import EvalQuestion, load_questions
from collective.evaluation.scoring import score
from collective.graph.builder import build_answer_graph
from collective.graph.context import CouncilContext
from collective.models.registry import close_all
from collective.modes import Mode, mode_context
from collective.session import load_settings


async def record(questions: list[EvalQuestion], path: Path, ctx: CouncilContext) -> None:
    done: dict[str, Any] = pickle.loads(path.read_bytes()) if path.exists() else {}
    ruled: list[dict[str, Any]] = []
    stage = modes._stage

    async def kept(graph: Any, state: dict[str, Any], settings: Any) -> Any:
        if state.get("own") and state.get("proposals"):  # the default's verdict stage
            ruled.append(dict(state))
        return await stage(graph, state, settings)

    modes._stage = kept
    try:
        for q in questions:
            if q.id in done:
                continue
            ruled.clear()
            await modes.run_arms(q.question, [Mode.single, Mode.self_moa], ctx)
            done[q.id] = ruled[0]
            path.write_bytes(pickle.dumps(done))
            print(q.id, flush=True)
    finally:
        modes._stage = stage
        await close_all()


async def replay(
    questions: list[EvalQuestion], path: Path, ctx: CouncilContext, out: Path | None
) -> None:
    states: dict[str, Any] = pickle.loads(path.read_bytes())
    alone = build_answer_graph(0, judge=True, retrieved=True, quorum=False)
    council = build_answer_graph(0, judge=True, retrieved=True)
    rows, scored = [], {"single": 0, "self-moa": 0}
    for q in questions:
        if q.id not in states:
            continue
        state = states[q.id]
        single = await alone.ainvoke(
            {**state, "proposals": []}, context=mode_context(ctx, Mode.single)[0]
        )
        default = await council.ainvoke(dict(state), context=mode_context(ctx, Mode.self_moa)[0])
        row = {"id": q.id, "question": q.question}
        for arm, verdict in (("single", single), ("self-moa", default)):
            row[arm] = verdict["answer"]
            row[f"{arm}_correct"] = score(q, verdict["answer"])
            scored[arm] += row[f"{arm}_correct"]
        rows.append(row)
        same = "same" if row["single"] == row["self-moa"] else "DIFFERENT"
        print(f"## {q.id} ({same}) {q.question}\n{row['single']}")
        if same != "same":
            print(f"-- the default:\n{row['self-moa']}")
    print(f"\nscored correct of {len(rows)}: single {scored['single']}, "
          f"self-moa {scored['self-moa']}")  # fmt: skip
    if out is not None:
        out.write_text("".join(json.dumps(r) + "\n" for r in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["record", "replay"])
    parser.add_argument("recording", type=Path)
    parser.add_argument("questions", type=Path, nargs="+")
    parser.add_argument("--kb", default=".collective/eval_kb.sqlite")
    parser.add_argument("--config", type=Path, default=Path("bench/eval.toml"))
    parser.add_argument("--out", type=Path, help="replay: the verdicts as JSON lines")
    parser.add_argument("--ids", nargs="*", default=[], help="replay: only these questions")
    args = parser.parse_args()
    questions = [q for path in args.questions for q in load_questions(path)
                 if not args.ids or q.id in args.ids]  # fmt: skip
    ctx = load_settings(args.config, {"kb": args.kb}).config.council_context()
    if args.action == "record":
        asyncio.run(record(questions, args.recording, ctx))
    else:
        asyncio.run(replay(questions, args.recording, ctx, args.out))


if __name__ == "__main__":
    main()
