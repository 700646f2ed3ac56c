"""The eval's table: per arm, accuracy, evidence recall, citations and cost.

Accuracy and evidence recall come with paired-bootstrap 95% CIs of the difference to one call
(`single`, else the first arm).

Answers are scored again from the rows (`scoring.score`): a rows file stays readable when the
scoring improves. Cost per question is what the arm costs alone; `spent` is what the run made,
each shared call once.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from collective.evaluation.questions import EvalQuestion
from collective.evaluation.scoring import bootstrap_diff, is_parrot, score

__all__ = ["adaptive_table", "baseline", "summarise", "table"]


def baseline(arms: Sequence[str]) -> str:
    """The arm every other is compared with: one call (`single`) where it runs."""
    return "single" if "single" in arms else arms[0]


def _mean(values: list[Any]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.mean(present) if present else None


def _ci(values: list[Any], base: list[Any]) -> list[float] | None:
    pairs = [(v, b) for v, b in zip(values, base, strict=True) if v is not None and b is not None]
    if not pairs:
        return None
    low, high = bootstrap_diff([float(v) for v, _ in pairs], [float(b) for _, b in pairs])
    return [round(low, 3), round(high, 3)]


def _arm(rows: list[dict[str, Any]], base: list[dict[str, Any]]) -> dict[str, Any]:
    correct = [r["correct"] for r in rows]
    recall = [r["recall"] for r in rows]
    return {
        "n": len(rows),
        "accuracy": statistics.mean(correct) if rows else 0.0,
        "accuracy_diff_ci95": _ci(correct, [r["correct"] for r in base]),
        "evidence_recall": _mean(recall),
        "recall_diff_ci95": _ci(recall, [r["recall"] for r in base]),
        "citation_precision": _mean([r["precision"] for r in rows]),
        "claims_supported": _mean([r["support"] for r in rows]),
        "unknown_citations": sum(r["unknown"] for r in rows),
        "parrots": sum(r["parrot"] for r in rows),
        "failed": sum(bool(r.get("error")) for r in rows),
        "calls_per_q": _mean([r["calls"] for r in rows]),
        "prompt_tokens_per_q": _mean([r["prompt_tokens"] for r in rows]),
        "output_tokens_per_q": _mean([r["output_tokens"] for r in rows]),
        "wall_s_per_q": _mean([r["wall_s"] for r in rows]),
    }


def summarise(
    questions: Sequence[EvalQuestion], rows: dict[str, dict[str, Any]], arms: Sequence[str]
) -> dict[str, Any]:
    """The summary of the questions every arm answered: all, then per kind where several.

    Returns:
        `{"questions": n, "baseline": arm, "groups": {group: {arm: {...}}}, "spent": {...}}`.
    """
    finished = [q for q in questions if all(a in rows.get(q.id, {}).get("arms", {}) for a in arms)]
    scored: dict[str, dict[str, dict[str, Any]]] = {}
    for q in finished:
        scored[q.id] = {}
        for arm in arms:
            row = dict(rows[q.id]["arms"][arm])
            row["correct"] = bool(score(q, row["answer"]) and not row.get("error"))
            row["parrot"] = is_parrot(row["answer"])
            scored[q.id][arm] = row
    base = baseline(arms)
    kinds = list(dict.fromkeys(q.kind for q in finished))
    groups = {"all": finished}
    if len(kinds) > 1:
        groups.update(
            {kind or "(no kind)": [q for q in finished if q.kind == kind] for kind in kinds}
        )
    out_groups = {}
    for name, group in groups.items():
        base_rows = [scored[q.id][base] for q in group]
        out_groups[name] = {
            arm: _arm([scored[q.id][arm] for q in group], base_rows) for arm in arms
        }
    lines = [s for q in finished for s in rows[q.id].get("spent", [])]
    spent = {key: sum(s.get(key, 0) for s in lines)
             for key in ("calls", "prompt_tokens", "output_tokens", "wall_s")}  # fmt: skip
    spent["wall_s"] = round(spent["wall_s"], 1)
    return {"questions": len(finished), "baseline": base, "groups": out_groups, "spent": spent}


def _f(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def _interval(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def adaptive_table(tuned: dict[str, Any]) -> str:
    """`adaptive` replayed from `single` and `self-moa` (`collective.evaluation.adaptive`)."""
    threshold = tuned["threshold"]
    chosen = "none (always the samples)" if threshold is None else f"{threshold:.3f}"
    lines = [
        f"adaptive, threshold on the lowest-window log-probability chosen on the tuning half: "
        f"{chosen}",
        "",
        "| half | n | accuracy | escalated | calls/q | output tok/q | wall s/q |",
        "|---|---|---|---|---|---|---|",
    ]
    for half in ("tuning", "test"):
        s = tuned[half]
        lines.append(
            f"| {half} | {s['n']} | {s['accuracy']:.2f} | {s['escalated']} | "
            f"{s['calls_per_q']:.1f} | {s['output_tokens_per_q']:.0f} | {s['wall_s_per_q']:.1f} |"
        )
    return "\n".join(lines)


def table(summary: dict[str, Any]) -> str:
    """The summary as Markdown tables (one per group), and what the run spent."""
    base = summary["baseline"]
    head = (
        f"| arm | n | accuracy | vs {base} (95% CI) | evidence recall | vs {base} (95% CI) | "
        "citation precision | claims supported | calls/q | prompt tok/q | output tok/q | "
        "wall s/q |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    parts = []
    for name, arms in summary["groups"].items():
        lines = [f"{name} questions:", "", head]
        for arm, s in arms.items():
            lines.append(
                f"| {arm} | {s['n']} | {s['accuracy']:.2f} | {_interval(s['accuracy_diff_ci95'])} "
                f"| {_f(s['evidence_recall'], '.2f')} | {_interval(s['recall_diff_ci95'])} | "
                f"{_f(s['citation_precision'], '.2f')} | {_f(s['claims_supported'], '.2f')} | "
                f"{_f(s['calls_per_q'], '.1f')} | {_f(s['prompt_tokens_per_q'], '.0f')} | "
                f"{_f(s['output_tokens_per_q'], '.0f')} | {_f(s['wall_s_per_q'], '.1f')} |"
            )
        parts.append("\n".join(lines))
    if tuned := summary.get("adaptive_threshold"):
        parts.append(adaptive_table(tuned))
    spent = summary["spent"]
    parts.append(
        f"{summary['questions']} questions; per arm, what it costs alone. The run spent "
        f"{spent['calls']} calls, {spent['prompt_tokens']} prompt and {spent['output_tokens']} "
        f"output tokens, {spent['wall_s']:.0f} s (shared calls once)."
    )
    return "\n\n".join(parts)
