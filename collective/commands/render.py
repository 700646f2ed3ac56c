"""Terminal rendering shared by `ask`, `chat` and `smoke`: progress, verdicts, budget tables.

Everything here draws with rich on a console the caller passes in; `ask --json` never comes
here except for the progress view, which goes to stderr.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from collective import agents

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live
    from rich.table import Table

__all__ = [
    "CLAIM_MARKS",
    "ProgressView",
    "short_model",
    "short_server",
    "budget_table",
    "format_ms",
    "marked_lines",
    "render_result",
    "section_summary",
    "timings_line",
]

_STYLE = {"waiting": "dim", "running": "yellow", "done": "green", "failed": "red"}


def format_ms(ms: float) -> str:
    """`850 ms`, `12.3 s`."""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


_QUANT = re.compile(r"[-._](?:instruct[-._])?(?:i?q\d\w*|f16|bf16|f32)$|[-._]instruct$", re.I)


def short_model(model: str) -> str:
    """A model's name for an 80-column terminal (`--json` and `--verbose` show it whole).

    No directory, `.gguf`, quantization or `-instruct`:
    `qwen2.5-coder-0.5b-instruct-q4_k_m` -> `qwen2.5-coder-0.5b`.
    """
    name = model.rstrip("/").rsplit("/", 1)[-1].removesuffix(".gguf")
    return _QUANT.sub("", name) or name


def short_server(server: str) -> str:
    """Where a call ran, short: `HOST:PORT` of a server; nothing for a model in this process."""
    found = re.search(r"://([^/\s|]+)", server)  # llamacpp:/path, embedded:NAME: in process
    return found.group(1) if found else ""


def _verbose() -> bool:
    """`collective --verbose` (the command line's root option) or `$COLLECTIVE_VERBOSE`."""
    from typer._click.globals import get_current_context

    from collective import environment

    ctx = get_current_context(silent=True)
    return bool(ctx and ctx.find_root().params.get("verbose")) or environment.verbose()


def _where(model: str, server: str, *, verbose: bool) -> str:
    """`model @ server`: whole with `verbose`, else short (no lone `@` for an in-process one)."""
    if verbose:
        return f"{model} @ {server}" if server else model
    short = short_server(server)
    return f"{short_model(model)} @ {short}" if short else short_model(model)


@dataclass
class _Row:
    status: str = "waiting"
    model: str = ""
    server: str = ""
    tokens_in: int | None = None
    tokens_out: int | None = None
    ms: float | None = None
    detail: str = ""
    streamed: int = 0
    """Pieces of the answer streamed so far (about one token each)."""
    first_at: float | None = None
    last_at: float | None = None

    def rate(self) -> str:
        """Tokens per second while the answer streams."""
        if self.first_at is None or self.last_at is None or self.streamed < 2:
            return ""
        seconds = self.last_at - self.first_at
        return f"{(self.streamed - 1) / seconds:.1f}" if seconds > 0 else ""


@dataclass
class ProgressView:
    """A live table of the council's nodes, fed by the graph's custom stream events.

    Args:
        k: Specialists expected (their rows show `waiting` from the start).
        console: Where to draw (stderr for `ask`).
        planned: Whether a planner plans (no planner: no `plan` row).
    """

    k: int
    console: Console
    planned: bool = True
    rows: dict[str, _Row] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)
    """The judge's answer as it is written (shown under the table while the run lasts)."""
    verdict_lines: int = 12
    verbose: bool = field(default_factory=_verbose)
    """Whole model names and server specs (else short ones, for 80 columns)."""
    _live: Live | None = None

    def __post_init__(self) -> None:
        for node in agents.live_rows(self.k, self.planned):
            self.rows[node] = _Row()

    def __enter__(self) -> ProgressView:
        from rich.live import Live

        self._live = Live(
            self.render(), console=self.console, refresh_per_second=8, transient=False
        )
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self.verdict_lines = 0  # the result printed next has the verdict
            self._live.update(self.render())
            self._live.__exit__(None, None, None)
            self._live = None
            if not self.console.is_terminal:
                self.console.line()  # Live leaves its last frame without a newline

    def event(self, event: Mapping[str, Any]) -> None:
        """Apply one event (`progress`, `stage`, `budget_event`, `fault`, `token`) and redraw.

        A `token` event (`node`, `text`) is a piece of a node's answer as it is written: the
        judge's is shown under the table, every node's count and rate in its row.
        """
        kind = event.get("type")
        if kind == "token":
            import time

            node = str(event.get("node", "?"))
            row = self.rows.setdefault(node, _Row())
            row.streamed += 1
            row.last_at = time.monotonic()
            row.first_at = row.first_at or row.last_at
            if node == agents.JUDGE:
                self.verdict.append(str(event.get("text", "")))
        elif kind == "progress":
            node = str(event.get("node", "?"))
            row = self.rows.setdefault(node, _Row())
            row.status = str(event.get("status", row.status))
            row.model = str(event.get("model") or row.model)
            row.server = str(event.get("server") or row.server)  # the replica that answered
            for name in ("tokens_in", "tokens_out", "ms"):
                if event.get(name) is not None:
                    setattr(row, name, event[name])
            if event.get("error"):
                row.detail = str(event["error"])
            elif row.status == "done":  # the judge's last stage is over
                row.detail = ""
        elif kind == "stage":  # what the judge does now: drafting, checking, fixing, weighing
            row = self.rows.setdefault(str(event.get("node", "?")), _Row())
            row.detail = str(event.get("stage", ""))
        elif kind in ("budget_event", "fault"):  # a fault: a replica lost, the run goes on
            self.warnings.append(f"{event.get('node')}: {event.get('message')}")
        else:
            return
        if self._live is not None:
            self._live.update(self.render())

    def finished(self, node: str, *, failed: str | None = None) -> None:
        """Mark a node finished from a state update (e.g. specialists restored on resume)."""
        row = self.rows.setdefault(node, _Row())
        if row.status in ("waiting", "running"):
            row.status = "failed" if failed else "done"
            row.detail = failed or row.detail
        if self._live is not None:
            self._live.update(self.render())

    def render(self) -> RenderableType:
        """The table as it stands."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        table = Table(title="council", title_justify="left", expand=False, box=None)
        for column in ("node", "status", "model", "in", "out", "tok/s", "time"):
            numeric = column in ("in", "out", "tok/s", "time")
            table.add_column(column, justify="right" if numeric else "left")
        table.add_column("detail", overflow="fold", max_width=60)
        for node, row in self.rows.items():
            table.add_row(
                node,
                Text(row.status, style=_STYLE.get(row.status, "")),
                _where(row.model, row.server, verbose=self.verbose),
                "" if row.tokens_in is None else str(row.tokens_in),
                _out(row),
                row.rate(),
                "" if row.ms is None else format_ms(row.ms),
                row.detail,
            )
        parts: list[RenderableType] = [table]
        if self.warnings:
            parts.append(Text("\n".join(self.warnings[-3:]), style="yellow"))
        if self.verdict and self.verdict_lines:
            lines = "".join(self.verdict).splitlines()[-self.verdict_lines :]
            parts.append(Text("verdict (as it is written):", style="bold"))
            parts.append(Text("\n".join(lines)))
        return parts[0] if len(parts) == 1 else Group(*parts)


def _out(row: _Row) -> str:
    """Answer tokens: the server's count when done, else the pieces streamed so far."""
    if row.tokens_out is not None:
        return str(row.tokens_out)
    return f"{row.streamed}..." if row.streamed else ""


def section_summary(section: Mapping[str, Any]) -> str:
    """`kb_chunks 1520/2500` (+slack, trimmed marks) for one section of a budget report."""
    allocated = int(section["allocated"])
    granted = section.get("granted")
    limit = f"{allocated}" + (f"+{int(granted) - allocated}" if granted else "")
    cut = "✂" if section.get("trimmed") else ""
    return f"{section['name']} {section['used']}/{limit}{cut}"


def budget_table(
    reports: Sequence[Mapping[str, Any]], title: str = "budgets", *, verbose: bool | None = None
) -> Table:
    """One row per model call: n_ctx, prompt + output, the counter, then its sections.

    Sections are listed one per line (`used/allocated`, `+N` slack received, `✂` trimmed) and
    models by their short names (`verbose`, default `--verbose`: whole, with the server's spec)
    so that the table fits an 80-column terminal.
    """
    verbose = _verbose() if verbose is None else verbose

    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_lines=True)
    table.add_column("call", overflow="fold", min_width=19)
    table.add_column("n_ctx · counter", justify="right", no_wrap=True)
    table.add_column("prompt+out", justify="right", no_wrap=True)
    table.add_column("section used/allocated", overflow="fold")
    for report in reports:
        fits = report.get("fits", True)
        sections = [
            section_summary(s) for s in report.get("sections", []) if s["allocated"] or s["used"]
        ]
        scaled = re.search(r"scaled x[\d.]+", str(report.get("scaled") or ""))
        table.add_row(
            f"{report['node']}\n[dim]{_call_model(report, verbose)}[/dim]"
            + (  # the agent's memory allowance profile and the tier that applied
                f"\n[dim]{report['memory_profile']} ({report['memory_tier']})[/dim]"
                if report.get("memory_profile")
                else ""
            ),
            f"{report['n_ctx']:,}\n{report['token_counter']}"
            + (f"\n[dim]{scaled.group(0)}[/dim]" if scaled else ""),
            f"{report['prompt_tokens']:,}+{report['max_output_tokens']:,}"
            + ("" if fits else " [red]✗[/red]")
            + _reuse(report),
            "\n".join(sections),
        )
    return table


def _call_model(report: Mapping[str, Any], verbose: bool) -> str:
    """The call's model and server: whole (one a line) with `verbose`, else short."""
    model, server = str(report["model"]), str(report.get("server") or "")
    if verbose:
        return model + (f"\n{server}" if server else "")
    return _where(model, server, verbose=False)


def _reuse(report: Mapping[str, Any]) -> str:
    """`shared N` and `reused M` under a call's prompt size, where known (the shared prefix).

    One a line, so that the column stays narrow and the table fits 80 columns.
    """
    return "".join(
        f"\n[dim]{label} {report[key]:,}[/dim]"
        for key, label in (("shared_tokens", "shared"), ("reused_tokens", "reused"))
        if report.get(key) is not None
    )


def timings_line(timings: Mapping[str, float]) -> str:
    """`retrieve 12 ms · plan 3.1 s · ... · total 20.4 s`, in the order recorded."""
    parts = [
        f"{k.removesuffix('_ms')} {format_ms(v)}" for k, v in timings.items() if k != "total_ms"
    ]
    if "total_ms" in timings:
        parts.append(f"total {format_ms(timings['total_ms'])}")
    return " · ".join(parts)


CLAIM_MARKS = {"supported": "✓", "retagged": "↻", "fixed": "✎", "uncited": "?"}
CLAIM_LEGEND = (
    "✓ supported by its chunk  ↻ retagged to the chunk that states it  ✎ fixed  ? uncited"
)


def marked_lines(answer: str, claims: Sequence[Mapping[str, Any]]) -> list[str]:
    """The verdict's lines, each marked by the check of the claims it holds (blank: none)."""
    from collective.verdict.marks import line_statuses

    return [
        f"{''.join(CLAIM_MARKS[s] for s in statuses) or ' ':<2} {line}"
        for line, statuses in line_statuses(answer, claims)
    ]


def _citation_lines(citations: Iterable[Mapping[str, str]]) -> list[str]:
    return [f"[KB#{c['id']}] {c.get('source', '')}" for c in citations]


def render_result(
    console: Console, result: Mapping[str, Any], *, thread_id: str | None, quiet: bool = False
) -> None:
    """The verdict with its citations, then (unless quiet) budgets, retrieval and timings."""
    from rich.markdown import Markdown
    from rich.panel import Panel
    from rich.text import Text

    answer = str(result.get("answer") or "").strip()
    claims = list(result.get("claims") or [])
    body: RenderableType = Markdown(answer) if answer else "[red](the judge gave no answer)[/red]"
    if answer and claims:
        body = Text("\n".join(marked_lines(answer, claims)))
    console.print(Panel(body, title="verdict", title_align="left"))
    if claims:
        console.print(f"[dim]{CLAIM_LEGEND}[/dim]", highlight=False)
    for claim in claims:
        if claim["status"] == "dropped":
            console.print(
                f"[yellow]dropped:[/yellow] {claim['text']!r} ({claim['reason']})", highlight=False
            )
    citations = list(result.get("citations") or [])
    if citations:
        console.print("[bold]citations[/bold]")
        for line in _citation_lines(citations):
            console.print(f"  {line}", markup=False, highlight=False)
    else:
        console.print("[yellow]the verdict cites no KB chunk[/yellow]")
    unknown = list(result.get("unknown_citations") or [])
    if unknown:
        console.print(
            f"[red]cited but never supplied (ignored):[/red] {', '.join(unknown)}", highlight=False
        )
    for proposal in result.get("proposals") or []:
        if proposal.get("error"):
            console.print(
                f"[red]{proposal['member']} failed:[/red] {proposal['error']}", highlight=False
            )
    if quiet:  # one line of notes (a cut question, a lost replica): never silently dropped
        if notes := list(result.get("notes") or []):
            from rich.markup import escape

            console.print(f"[yellow]notes:[/yellow] {escape(' · '.join(notes))}", highlight=False)
        return
    budgets = list(result.get("budgets") or [])
    if budgets:
        console.print(budget_table(budgets))
    retrieval = result.get("retrieval") or {}
    if retrieval:
        console.print(
            f"retrieval: requested {retrieval.get('requested')}, applied "
            f"{retrieval.get('applied')} ({retrieval.get('reason')}); "
            f"{retrieval.get('candidates')} candidates, "
            f"{len(retrieval.get('injected') or [])} injected",
            highlight=False,
        )
    for row in result.get("ranking_aggregate") or []:
        console.print(
            f"peer review: {row['member']} mean rank {row['mean_rank']:.2f} ({row['votes']} votes)",
            highlight=False,
        )
    for call in result.get("tool_calls") or []:
        console.print(
            f"judge tool call (round {call['round']}): {call['name']}({call['arguments']}) -> "
            f"{call['tokens']} tokens",
            markup=False,
            highlight=False,
        )
    timings = result.get("timings") or {}
    if timings:
        console.print(f"timings: {timings_line(timings)}", highlight=False)
    for note in result.get("notes") or []:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    if thread_id:
        console.print(f"[dim]thread {thread_id} (continue with --thread {thread_id})[/dim]")
