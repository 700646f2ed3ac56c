"""Prompt assembly: fill a `ModelBudget` section by section and prove the whole prompt fits.

A prompt module offers content per plan section (`SectionContent`) and a `compose` function that
turns the fitted section texts into chat messages. `assemble`:

1. fits every fixed section (system, conversation summary, task, tools) to its allocation;
2. pools what they left unused and hands it on in `SLACK_ORDER` (KB chunks, then proposals,
   then evidence), each taking its allocation plus whatever slack remains;
3. composes the messages, counts the whole prompt as the model sees it (template included) and,
   should the rare join or template token push it past the context, shrinks the largest
   flexible section and refits. The result always satisfies
   `prompt_tokens + output_budget <= n_ctx` under the counter used, or raises `BudgetError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collective.budget.counting import ChatMessage, TokenCounter
from collective.budget.plans import SAFETY_MARGIN, SLACK_ORDER, ModelBudget
from collective.budget.report import BudgetReport, SectionUsage
from collective.budget.trimming import (
    Fitted,
    Keep,
    Scored,
    select_chunks,
    share_fairly,
    trim_text,
)
from collective.errors import BudgetError, ConfigError

__all__ = [
    "AssembledPrompt",
    "SectionContent",
    "Sections",
    "assemble",
    "chunks_section",
    "labelled_section",
    "text_section",
]

Fit = Callable[[TokenCounter, int], Fitted]


@dataclass(frozen=True)
class SectionContent:
    """Content offered for one plan section; `fit` cuts it to a token limit."""

    name: str
    fit: Fit


def text_section(
    name: str, text: str, keep: Keep = "start", alike: Sequence[str] = (), own: str = ""
) -> SectionContent:
    """Plain text, trimmed on token boundaries with a marker where cut.

    `own` is the caller's own part of the section (a role's part of its task: who it is, the
    answer's format), composed after every shared part (`Fitted.own`); it is kept whole while
    it fits, and `text` trimmed to what it leaves. `alike` are the own parts sibling calls put
    here (the other members'): while every one fits, the section counts as if it held the
    largest, so it leaves every sibling the same slack and the sections fitted after it (the KB
    chunks) come out the same: the members' prompts keep one shared prefix.
    """

    def fit(counter: TokenCounter, limit: int) -> Fitted:
        if not own:
            return trim_text(counter, text, limit, keep)
        mine = trim_text(counter, own, limit, "start")
        sizes = counter.count_many(counter.within_reach(alike, limit)) if alike else []
        reserved = max([mine.tokens, *(n for n in sizes if n <= limit)])
        join = counter.count(_OWN_JOIN) if text else 0
        shared = trim_text(counter, text, max(0, limit - reserved - join), keep)
        used = shared.tokens + (join if shared.text else 0) + reserved
        note = f"sized as its largest sibling ({used} tokens) for one shared prefix"
        return Fitted(
            shared.text,
            used,
            shared.trimmed or mine.trimmed,
            note if reserved > mine.tokens else "",
            own=mine.text,
        )

    return SectionContent(name, fit)


_OWN_JOIN = "\n\n"
"""What `compose` puts between a section's shared text and the own parts after it."""


def chunks_section(name: str, chunks: Sequence[Scored]) -> SectionContent:
    """Scored pieces (rendered KB chunks): the best subset that fits, with the trim header."""
    return SectionContent(name, lambda counter, limit: select_chunks(counter, chunks, limit))


def labelled_section(name: str, items: Sequence[tuple[str, str]]) -> SectionContent:
    """Labelled texts (specialist proposals) sharing the limit fairly; labels are never cut."""

    def fit(counter: TokenCounter, limit: int) -> Fitted:
        if not items:
            return Fitted("", 0)
        labels = [f"{label}\n" for label, _ in items]
        sep = "\n\n"
        frame = sum(counter.count_many(labels)) + counter.count(sep) * (len(items) - 1)
        parts = share_fairly(counter, [text for _, text in items], max(0, limit - frame))
        text = sep.join(label + part.text for label, part in zip(labels, parts, strict=True))
        used = frame + sum(p.tokens for p in parts)  # piecewise, like select_chunks
        return Fitted(text, used, any(p.trimmed for p in parts))

    return SectionContent(name, fit)


@dataclass(frozen=True)
class AssembledPrompt:
    """A prompt that fits, with the report that proves it."""

    messages: list[ChatMessage]
    report: BudgetReport
    sections: Mapping[str, Fitted]

    def kept(self, *names: str) -> list[str]:
        """Keys of the pieces kept in the named sections (the KB chunks the model was shown).

        A section the plan lacks contributes nothing: what was never sent was never seen.
        """
        keys = (key for name in names if name in self.sections for key in self.sections[name].kept)
        return list(dict.fromkeys(keys))

    def own(self) -> list[str]:
        """The caller's own parts of its sections (`Fitted.own`), in plan order."""
        return [f.own for f in self.sections.values() if f.own]


_MAX_REFITS = 8


def assemble(
    plan: ModelBudget,
    counter: TokenCounter,
    contents: Sequence[SectionContent],
    compose: Callable[[Sections], list[ChatMessage]],
    *,
    node: str,
    model: str,
    notes: Sequence[str] = (),
    tools: Sequence[dict[str, Any]] | None = None,
) -> AssembledPrompt:
    """Fit `contents` into `plan` and compose the messages.

    Args:
        plan: The budget, already fitted to the model's real context.
        counter: The model's counter; the report names its kind.
        contents: Content per plan section; plan sections without content count as unused, and
            content for a section the plan lacks is left out (the report notes it).
        compose: Builds the chat messages from the fitted section texts (by section name) and
            their own parts (`Sections.own`).
        node: The graph node making the call, for the report.
        model: The model name, for the report.
        notes: Extra lines for the report (e.g. why the KB allocation changed).
        tools: Tool schemas sent beside the messages: the prompt total counts them as the
            counter's template renders them (`TokenCounter.count_messages`), exactly where the
            counter renders the server's template (llama-server, llama.cpp in process).

    Raises:
        BudgetError: The prompt cannot be made to fit.
        ConfigError: `compose` needs a section the plan lacks (say `task`): the plan is refused
            as `check_role_sections` refuses it for a role.
    """
    offered = {c.name: c for c in contents if c.name in plan.sections}
    # A plan may leave a section out on purpose (an explicit plan with no tools, say).
    dropped = [c.name for c in contents if c.name not in plan.sections]
    notes = [*notes, *(f"{name}: not in plan {plan.name!r}, content left out" for name in dropped)]
    limits, fitted = _fit_all(plan, counter, offered)
    for _ in range(_MAX_REFITS):
        messages = compose(Sections(fitted, plan, node))
        total = counter.count_messages(messages, tools)
        excess = total + plan.output_budget - plan.n_ctx
        if excess <= 0:
            return AssembledPrompt(
                messages, _report(plan, counter, fitted, limits, total, node, model, notes), fitted
            )
        # Only whole-prompt tokens (template, joins) can get here: shrink the largest section.
        name = max(fitted, key=lambda n: (n in SLACK_ORDER, fitted[n].tokens))
        if fitted[name].tokens == 0:
            break
        limits[name] = max(0, fitted[name].tokens - excess)
        fitted[name] = _fit(offered, name, counter, limits[name])
    raise BudgetError(
        f"{node}: the prompt for {model} cannot fit n_ctx {plan.n_ctx} with {plan.output_budget} "
        "output tokens reserved; shorten the system prompt or raise the model's context"
    )


class Sections(dict[str, str]):
    """The fitted section texts handed to `compose`, and each section's own part (`own`).

    A section the plan lacks is refused by name (`ConfigError`), not a bare `KeyError` from
    inside the prompt module.
    """

    def __init__(
        self, fitted: Mapping[str, Fitted], plan: ModelBudget | None = None, node: str = ""
    ) -> None:
        super().__init__({name: f.text for name, f in fitted.items()})
        self.plan, self.node = plan, node
        self.own: dict[str, str] = {name: f.own for name, f in fitted.items() if f.own}
        """The caller's own part of each section that has one, to compose after the shared."""

    def __missing__(self, name: str) -> str:
        if self.plan is None:
            raise KeyError(name)
        raise ConfigError(
            f"{self.node}: the budget plan {self.plan.name!r} has no {name!r} section, which "
            f"this prompt needs (its sections: {', '.join(self.plan.sections)}); add the "
            "section to the plan or use the role's preset"
        )


def _fit(
    offered: Mapping[str, SectionContent], name: str, counter: TokenCounter, limit: int
) -> Fitted:
    return offered[name].fit(counter, limit) if name in offered else Fitted("", 0)


def _fit_all(
    plan: ModelBudget, counter: TokenCounter, offered: Mapping[str, SectionContent]
) -> tuple[dict[str, int], dict[str, Fitted]]:
    """Fit every section: fixed ones to their allocation, then slack flows in SLACK_ORDER."""
    limits: dict[str, int] = {}
    fitted: dict[str, Fitted] = {}
    pool = 0
    for name, allocated in plan.sections.items():
        if name not in SLACK_ORDER:
            limits[name] = 0 if name == SAFETY_MARGIN else allocated
            fitted[name] = _fit(offered, name, counter, limits[name])
            pool += limits[name] - fitted[name].tokens
    for name in SLACK_ORDER:
        if name in plan.sections:
            limits[name] = plan.sections[name] + pool
            fitted[name] = _fit(offered, name, counter, limits[name])
            pool = limits[name] - fitted[name].tokens
    order = list(plan.sections)
    return limits, dict(sorted(fitted.items(), key=lambda kv: order.index(kv[0])))


def _report(
    plan: ModelBudget,
    counter: TokenCounter,
    fitted: Mapping[str, Fitted],
    limits: Mapping[str, int],
    total: int,
    node: str,
    model: str,
    notes: Sequence[str],
) -> BudgetReport:
    sections = []
    for name, allocated in plan.sections.items():
        f = fitted[name]
        granted = limits[name] if name in SLACK_ORDER and limits[name] > allocated else None
        sections.append(SectionUsage(name, allocated, f.tokens, granted, f.trimmed, f.note))
    return BudgetReport(
        node=node,
        model=model,
        n_ctx=plan.n_ctx,
        prompt_tokens=total,
        max_output_tokens=plan.output_budget,
        token_counter=counter.kind,
        sections=sections,
        scaled=plan.scaled,
        notes=list(notes),
    )
