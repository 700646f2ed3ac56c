"""The planner's prompt: the council's shared prefix, then the planner's own part.

The planner reads the same rules, conversation and KB chunks as the members, in the same order
(`collective.prompts.council`), so in process the members reuse its prefix from the KV.
"""

from __future__ import annotations

from collective.prompts import council

__all__ = ["MAX_TOKENS", "OWN", "SYSTEM", "compose", "task_text"]

SYSTEM = council.SYSTEM

compose = council.compose

OWN = f"""{council.OWN_PART}
You are the planner. Do not answer the question yourself: write a short deliberation strategy \
for the council, at most 5 lines:
- what the question really asks and what a good answer must settle;
- one distinct angle for each specialist (Specialist 1: ..., Specialist 2: ..., ...);
- which knowledge-base topics matter most."""


MAX_TOKENS = 160
"""The plan's output cap: five short lines. Uncapped, the 0.5B filled the 384 of its preset
and the plan took 35-40 s of `make demo`'s council."""


def task_text(question: str) -> council.Task:
    """The task: the question (shared with the members), then the planner's part."""
    return council.task_text(question, OWN)
