"""Budget reports: what each assembled prompt allocated and used, per section."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["BudgetReport", "SectionUsage"]


@dataclass(frozen=True)
class SectionUsage:
    """One section of an assembled prompt."""

    name: str
    allocated: int
    """Tokens the plan gave the section."""
    used: int
    """Tokens the section's rendered text really has."""
    granted: int | None = None
    """Allocation plus slack received from sections that needed less (None: no slack)."""
    trimmed: bool = False
    """Whether content was cut or dropped to fit."""
    note: str = ""


@dataclass(frozen=True)
class BudgetReport:
    """The budget of one model call, as the `--json` contract shows it."""

    node: str
    model: str
    n_ctx: int
    prompt_tokens: int
    """The whole prompt as the model sees it (template included), counted by `token_counter`."""
    max_output_tokens: int
    token_counter: str
    sections: list[SectionUsage] = field(default_factory=list)
    scaled: str = ""
    """Why the plan differs from its preset (e.g. scaled to a 4,096-token slot); empty if not."""
    notes: list[str] = field(default_factory=list)
    memory_profile: str = ""
    """The agent's memory budget profile (empty when the call was not monitored)."""
    memory_tier: str = ""
    """The complexity tier that set its memory budget (`simple -> medium` after a bump)."""
    finish_reason: str | None = None
    """Why the answer ended (`stop`, `length`: cut at `max_output_tokens` or by the context,
    `tool_calls`); None before the call or when the backend does not say."""
    output_tokens: int | None = None
    """Tokens the answer took (None before the call); of all its completions together."""
    completions: int = 1
    """Completions of the one prompt (same-prompt samples), each within the prompt's window:
    `fits` holds for every one."""
    shared_tokens: int | None = None
    """Prompt tokens outside the caller's own parts (`Fitted.own`: a role's part of its task, a
    member's KB slice): the council's shared prefix, the same in every member's prompt; None for
    prompts without one."""
    reused_tokens: int | None = None
    """Prompt tokens the server reused from its KV instead of computing them (llama-server
    `cache_n`, Ollama `prompt_eval_cached_count`, in process the batch engine's); None when the
    server does not say."""
    server: str | None = None
    """The backend spec that answered (one replica of a replica set); None before the call."""
    faults: list[dict[str, str]] = field(default_factory=list)
    """Replicas that failed this call before another answered it: `server`, what `failed`,
    what was done `instead` and the line (`message`); also in `notes`."""

    @property
    def fits(self) -> bool:
        """The invariant: prompt tokens + reserved output <= the real context."""
        return self.prompt_tokens + self.max_output_tokens <= self.n_ctx

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the shape of the `budgets` entries in state and `--json`)."""
        # Spelled out rather than `asdict`: this runs for every model call.
        return {
            "node": self.node,
            "model": self.model,
            "n_ctx": self.n_ctx,
            "prompt_tokens": self.prompt_tokens,
            "max_output_tokens": self.max_output_tokens,
            "fits": self.fits,
            "token_counter": self.token_counter,
            "sections": [s.__dict__.copy() for s in self.sections],
            "scaled": self.scaled,
            "notes": list(self.notes),
            "memory_profile": self.memory_profile,
            "memory_tier": self.memory_tier,
            "finish_reason": self.finish_reason,
            "output_tokens": self.output_tokens,
            "completions": self.completions,
            "shared_tokens": self.shared_tokens,
            "reused_tokens": self.reused_tokens,
            "server": self.server,
            "faults": [dict(f) for f in self.faults],
        }
