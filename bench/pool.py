"""K specialists on one unified-pool llama-server versus the same on K independent slots.

Starts the real llama-server with the embedded gemma model twice per K:

* unified: `-c POOL -np K --kv-unified`: K slots over one pool of POOL tokens; each slot
  reports the whole POOL, so K prompts that each fit a slot overflow the pool together
  without admission control (llama.cpp then fails every active slot with HTTP 500);
* per-slot: `-c SLOT*K -np K` named `?kv=per-slot`: K independent slots of SLOT tokens.

Each run sends K specialist calls at once through `budgeted_call` (as the council's fan-out
does), every prompt a KB section filled by one huge chunk (about `--prompt` tokens, 16 output).
Prints per K the wall time of each layout, their ratio (unified / per-slot), the peak tokens in
flight against the pool, and the errors (goal: 0). With `--repeat N` the two layouts take turns
N times per K (so a change in the machine's load hits both alike), and the figures are the
medians, with the range of the N ratios.
Run: .venv/bin/python bench/pool.py [--ks 3,5,8] [--slot 512] [--pool 1024] [--prompt 300]
[--repeat 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from backends import _binary, _start  # noqa: E402  (same folder: llama-server set-up)

from collective.budget.assembly import chunks_section, text_section  # noqa: E402
from collective.budget.plans import ModelBudget  # noqa: E402
from collective.budget.trimming import Scored  # noqa: E402
from collective.budgeted_call import budgeted_call  # noqa: E402
from collective.graph.context import CouncilContext  # noqa: E402
from collective.kb.citations import tag  # noqa: E402
from collective.models.admission import AdmissionControl  # noqa: E402
from collective.models.embedded import embedded_model_path  # noqa: E402
from collective.models.llama_server import LlamaServerBackend  # noqa: E402
from collective.prompts import specialist as prompt  # noqa: E402

QUESTION = "What does aspirin do, in one sentence?"
HUGE = " ".join(
    f"Aspirin note {i}: acetylsalicylic acid irreversibly inhibits the COX enzymes."
    for i in range(400)
)


async def _council(url: str, k: int, prompt_tokens: int) -> tuple[float, int, int, int]:
    """Wall seconds, errors, peak tokens in flight and the pool size of one K-call fan-out."""
    plan = ModelBudget(
        name="specialist",
        n_ctx=prompt_tokens + 16,
        prompt_budget=prompt_tokens,
        output_budget=16,
        sections={"system": 140, "kb_chunks": prompt_tokens - 200, "task": 60},
    )
    ctx = CouncilContext(budgets={"specialist": plan}, temperature=0.0)
    backend = LlamaServerBackend(url)
    admission = AdmissionControl()

    async def member(i: int) -> None:
        chunk_id = f"mem_{i:08x}"
        chunk = Scored(chunk_id, f"{tag(chunk_id)} [Score: 0.90] {HUGE}", 0.9, mark=tag(chunk_id))
        await budgeted_call(
            ctx,
            role="specialist",
            agent=f"specialist-{i}",
            backend=backend,
            contents=[
                text_section("system", prompt.SYSTEM.format(member=f"specialist-{i}", k=k)),
                chunks_section("kb_chunks", [chunk]),
                text_section("task", prompt.task_text(QUESTION, "", f"specialist-{i}")),
            ],
            compose=prompt.compose,
            question=QUESTION,
            admission=admission,
        )

    try:
        pool = await backend.pool()
        started = time.perf_counter()
        done = await asyncio.gather(*(member(i) for i in range(k)), return_exceptions=True)
        wall = time.perf_counter() - started
    finally:
        await backend.aclose()
    errors = [d for d in done if isinstance(d, BaseException)]
    for error in errors:
        print(f"  error: {type(error).__name__}: {error}", flush=True)
    return wall, len(errors), admission.peak.get(pool.server, 0), pool.tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default="3,5,8")
    parser.add_argument("--slot", type=int, default=512, help="per-slot context (per-slot run)")
    parser.add_argument("--pool", type=int, default=1024, help="-c of the unified run")
    parser.add_argument("--prompt", type=int, default=300, help="prompt tokens per specialist")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each layout per K")
    args = parser.parse_args()
    binary = _binary()
    print(f"prompt budget {args.prompt} + 16 output per specialist; cpus {os.cpu_count()}")
    print(f"{'K':>2} {'unified s':>10} {'per-slot s':>10} {'ratio':>6} {'peak/pool':>12} errors")
    for k in (int(x) for x in args.ks.split(",")):
        runs: dict[str, list[tuple[float, int, int, int]]] = {"unified": [], "per-slot": []}
        for _ in range(args.repeat):
            for layout, done in runs.items():
                flags: tuple[str, ...]
                if layout == "unified":
                    flags = ("-c", str(args.pool), "-np", str(k), "--kv-unified")
                else:
                    flags = ("-c", str(args.slot * k), "-np", str(k))
                proc, url = _start(binary, embedded_model_path("gemma-3-270m"), *flags)
                try:
                    spec = url if layout == "unified" else url + "?kv=per-slot"
                    done.append(asyncio.run(_council(spec, k, args.prompt)))
                finally:
                    proc.terminate()
                    proc.wait(timeout=10)
        unified, per_slot = runs["unified"], runs["per-slot"]
        uw = statistics.median(r[0] for r in unified)
        pw = statistics.median(r[0] for r in per_slot)
        ratios = sorted(u[0] / p[0] for u, p in zip(unified, per_slot, strict=True))
        spread = f" ({ratios[0]:.2f}-{ratios[-1]:.2f})" if len(ratios) > 1 else ""
        peak, pool = max(r[2] for r in unified), unified[0][3]
        errors = sum(r[1] for r in unified + per_slot)
        print(
            f"{k:>2} {uw:>10.2f} {pw:>10.2f} {uw / pw:>6.2f} {peak:>5}/{pool:<6} {errors}{spread}",
            flush=True,
        )


if __name__ == "__main__":
    main()
