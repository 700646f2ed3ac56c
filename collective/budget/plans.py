"""Token budget plans: how one model call's context is divided, and how a plan meets reality.

A `ModelBudget` divides a model's context into a reserved output and a prompt budget, and the
prompt budget into named sections. The two reference presets are those of docs/design.md. A
preset is fitted to the context the server really reports (`fit_to_context`): on a smaller slot
every figure shrinks in proportion, and the plan says it was scaled and why.

Slack flows in `SLACK_ORDER`: when prompt assembly finds a section using less than its allocation
(no tools, a short task), the unused tokens go first to `kb_chunks`, then to `proposals`, then to
`evidence`. `safety_margin` is never filled and never given away; it absorbs chat-template
overhead that only the final whole-prompt count sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from collective.errors import BudgetError, ConfigError

__all__ = [
    "BudgetRole",
    "BudgetSections",
    "JUDGE_PRESET",
    "PLANNER_PRESET",
    "PRESETS",
    "REQUIRED_SECTIONS",
    "REVIEWER_PRESET",
    "SAFETY_MARGIN",
    "SLACK_ORDER",
    "SPECIALIST_PRESET",
    "ModelBudget",
    "check_role_sections",
    "default_preset",
    "parse_plan",
]

BudgetRole = Literal["planner", "specialist", "reviewer", "judge", "chat"]
"""Roles with a budget plan and an answer cap (`chat`: the `collective chat` model)."""

REQUIRED_SECTIONS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "planner": ("system", "task"),
        "specialist": ("system", "task"),
        "reviewer": ("system", "task", "proposals"),
        "judge": ("system", "task", "proposals"),
        "chat": ("system", "task"),
    }
)
"""Sections without which a role's prompt means nothing (its rules, its question, and for the
judge and reviewers the proposals); every other section may be left out of a plan."""

SLACK_ORDER: tuple[str, ...] = ("kb_chunks", "proposals", "evidence")
"""Sections that receive unused tokens, in this order."""

SAFETY_MARGIN = "safety_margin"
"""The section reserved for what only the whole-prompt count sees (template tokens)."""


@dataclass(frozen=True)
class ModelBudget:
    """The token plan of one model call.

    Attributes:
        name: The plan's name (`specialist`, `judge`, ...).
        n_ctx: The whole context window the plan was made for.
        prompt_budget: Tokens the prompt may take.
        output_budget: Tokens reserved for the model's answer.
        sections: Allocation per named section, in prompt order; sums to at most prompt_budget.
        scaled: Why the plan differs from its preset; empty when it does not.
    """

    name: str
    n_ctx: int
    prompt_budget: int
    output_budget: int
    sections: Mapping[str, int] = field(default_factory=dict)
    scaled: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sections", MappingProxyType(dict(self.sections)))
        where = f"budget plan {self.name!r}"
        for label, value in (
            ("n_ctx", self.n_ctx),
            ("prompt_budget", self.prompt_budget),
            ("output_budget", self.output_budget),
        ):
            if value < 0:
                raise BudgetError(f"{where}: {label} is {value}; sizes must be >= 0")
        for section, value in self.sections.items():
            if value < 0:
                raise BudgetError(f"{where}: section {section!r} is {value}; sizes must be >= 0")
        if self.output_budget >= self.n_ctx:
            raise BudgetError(
                f"{where}: output_budget {self.output_budget} must be smaller than n_ctx "
                f"{self.n_ctx}; lower the output budget or use a model with a larger context"
            )
        if self.prompt_budget + self.output_budget > self.n_ctx:
            raise BudgetError(
                f"{where}: prompt_budget {self.prompt_budget} + output_budget "
                f"{self.output_budget} exceed n_ctx {self.n_ctx}"
            )
        total = 0
        for section, value in self.sections.items():
            total += value
            if total > self.prompt_budget:
                raise BudgetError(
                    f"{where}: sections sum to {total} at section {section!r}, past the prompt "
                    f"budget {self.prompt_budget}; shrink {section!r} or the sections before it"
                )

    @property
    def unallocated(self) -> int:
        """Prompt tokens no section claims."""
        return self.prompt_budget - sum(self.sections.values())

    def fit_to_context(self, n_ctx: int, why: str = "") -> ModelBudget:
        """This plan fitted to a real context of `n_ctx` tokens.

        On a larger context the allocations stay as they are (more room is not assumed to be
        wanted) and only `n_ctx` records the real window; a smaller context scales every figure
        by `n_ctx / self.n_ctx`, rounding down so the scaled plan always fits.

        Args:
            n_ctx: The context the server reports for one request (e.g. a llama-server slot).
            why: Where the figure came from, for the report.
        """
        if n_ctx <= 0:
            raise BudgetError(f"budget plan {self.name!r}: the server reported n_ctx={n_ctx}")
        if n_ctx >= self.n_ctx:
            return replace(self, n_ctx=n_ctx)
        ratio = n_ctx / self.n_ctx
        reason = (
            f"scaled x{ratio:.3f} from the {self.n_ctx:,}-token preset to the real context of "
            f"{n_ctx:,} tokens" + (f" ({why})" if why else "")
        )
        return ModelBudget(
            name=self.name,
            n_ctx=n_ctx,
            prompt_budget=int(self.prompt_budget * ratio),
            output_budget=max(1, int(self.output_budget * ratio)),
            sections={k: int(v * ratio) for k, v in self.sections.items()},
            scaled=reason,
        )

    def with_output(self, output_budget: int) -> ModelBudget:
        """The plan with a different output reservation (e.g. a role's smaller answer cap)."""
        return replace(self, output_budget=output_budget)

    def resize(
        self, section: str, factor: float, donors: Iterable[str] = ("tools",)
    ) -> ModelBudget:
        """Scale one section by `factor` within the prompt budget.

        Shrinking leaves the freed tokens unallocated. Growing draws first on unallocated
        tokens, then on `donors` in order, and never past the prompt budget.
        """
        if section not in self.sections or factor == 1:
            return self
        sections = dict(self.sections)
        target = int(sections[section] * factor)
        need = target - sections[section]
        if need > 0:
            free = self.unallocated
            for donor in donors:
                if donor != section and free < need and donor in sections:
                    take = min(sections[donor], need - free)
                    sections[donor] -= take
                    free += take
            target = sections[section] + min(need, free)
        sections[section] = max(0, target)
        return replace(self, sections=sections)


SPECIALIST_PRESET = ModelBudget(
    name="specialist",
    n_ctx=32_768,
    prompt_budget=24_000,
    output_budget=8_000,
    sections={
        "system": 4_000,
        "conversation_summary": 2_000,
        "kb_chunks": 10_000,
        "task": 2_000,
        "tools": 4_000,
        SAFETY_MARGIN: 2_000,
    },
)
"""Athene-V2-Agent on a 32K llama-server slot (docs/design.md)."""

JUDGE_PRESET = ModelBudget(
    name="judge",
    n_ctx=131_072,
    prompt_budget=100_000,
    output_budget=8_000,
    sections={
        "system": 4_000,
        "conversation_summary": 2_000,
        "kb_chunks": 35_000,
        "proposals": 25_000,
        "evidence": 15_000,
        "task": 2_000,
        "tools": 10_000,
        SAFETY_MARGIN: 7_000,
    },
)
"""GPT-OSS 120B on Ollama with num_ctx 131072 (docs/design.md)."""

PLANNER_PRESET = ModelBudget(
    name="planner",
    n_ctx=8_192,
    prompt_budget=6_000,
    output_budget=1_024,
    sections={
        "system": 1_000,
        "conversation_summary": 1_000,
        "kb_chunks": 2_000,
        "task": 1_000,
        SAFETY_MARGIN: 1_000,
    },
)
"""The planner's small budget: a short deliberation strategy, not an answer."""

REVIEWER_PRESET = ModelBudget(
    name="reviewer",
    n_ctx=SPECIALIST_PRESET.n_ctx,
    prompt_budget=SPECIALIST_PRESET.prompt_budget,
    output_budget=1_000,
    sections={
        "system": 4_000,
        "conversation_summary": 2_000,
        "proposals": 10_000,
        "task": 2_000,
        "tools": 4_000,
        SAFETY_MARGIN: 2_000,
    },
)
"""A specialist ranking its peers (peer-review round): the specialist's own budget, its KB
allocation given to the anonymised proposals, and a short structured answer."""

PRESETS: Mapping[str, ModelBudget] = MappingProxyType(
    {p.name: p for p in (SPECIALIST_PRESET, JUDGE_PRESET, PLANNER_PRESET, REVIEWER_PRESET)}
)
"""The presets by name, as config refers to them."""


def default_preset(role: str) -> str:
    """The preset of a role whose budget names none: its own (`chat` has the specialist's)."""
    return "specialist" if role == "chat" else role


def check_role_sections(role: str, plan: ModelBudget) -> None:
    """Refuse a plan that lacks a section `role` needs (see `REQUIRED_SECTIONS`).

    Raises:
        ConfigError: Names the missing sections and what to do.
    """
    missing = [s for s in REQUIRED_SECTIONS.get(role, ()) if s not in plan.sections]
    if missing:
        names = ", ".join(repr(s) for s in missing)
        raise ConfigError(
            f"the {role}'s budget plan {plan.name!r} has no {names} section; the {role} needs "
            f"{', '.join(REQUIRED_SECTIONS[role])}: add the section or use the {role} preset"
        )


class BudgetSections(BaseModel):
    """An explicit budget plan instead of a preset name."""

    model_config = ConfigDict(extra="forbid")

    n_ctx: int = Field(
        gt=0,
        description="The context the plan is made for (scaled down to a smaller real context).",
    )
    output: int = Field(gt=0, description="Tokens reserved for the answer.")
    prompt: int | None = Field(
        default=None, gt=0, description="Prompt budget; default: the sum of the sections."
    )
    sections: dict[str, int] = Field(description="Tokens per section, in prompt order.")

    @field_validator("sections")
    @classmethod
    def _sections_positive(cls, value: dict[str, int]) -> dict[str, int]:
        if not value:
            raise ValueError("give at least one section, e.g. system = 1000")
        for name, size in value.items():
            if size < 0:
                raise ValueError(f"section {name!r} is {size}; sizes must be >= 0")
        return value

    def plan(self, name: str) -> ModelBudget:
        """The `ModelBudget` these figures describe.

        Raises:
            BudgetError: The figures do not add up (sections past the prompt budget, ...).
        """
        prompt = self.prompt if self.prompt is not None else sum(self.sections.values())
        return ModelBudget(name, self.n_ctx, prompt, self.output, self.sections)


def parse_plan(ref: str | ModelBudget | BudgetSections | Mapping[str, Any]) -> ModelBudget:
    """A role's budget setting as a plan: the one reading of it (`CouncilContext` calls it).

    `ref` is a preset name, a `ModelBudget` (kept as it is), or explicit sections
    (`BudgetSections` or its `{n_ctx, output, sections}` table, a plan named `explicit`).

    Raises:
        ConfigError: An unknown preset, a malformed table, or figures that do not add up.
    """
    if isinstance(ref, ModelBudget):
        return ref
    if isinstance(ref, str):
        if ref not in PRESETS:
            raise ConfigError(
                f"unknown preset {ref!r}; use one of {', '.join(PRESETS)} or explicit sections "
                "(n_ctx, output, sections)"
            )
        return PRESETS[ref]
    try:
        sections = ref if isinstance(ref, BudgetSections) else BudgetSections(**ref)
        return sections.plan("explicit")
    except BudgetError as exc:
        raise ConfigError(str(exc)) from None
    except (ValidationError, TypeError) as exc:
        raise ConfigError(
            f"give a preset name or {{n_ctx, output, sections}} ({' '.join(str(exc).split())})"
        ) from None
