"""The planner's prompt: a short deliberation strategy for the council."""

from __future__ import annotations

from collections.abc import Mapping

from collective.budget.counting import ChatMessage

SYSTEM = """You are the planner of a council of {k} specialists who will answer a question \
together, each on its own, before a judge writes the verdict.
Write a short deliberation strategy, at most 5 lines:
- what the question really asks and what a good answer must settle;
- one distinct angle for each specialist (Specialist 1: ..., Specialist 2: ..., ...);
- which knowledge-base topics matter most.
Do not answer the question yourself."""


def compose(sections: Mapping[str, str]) -> list[ChatMessage]:
    """Messages from the fitted sections."""
    user = [f"## Question\n{sections['task']}"]
    if sections.get("conversation_summary"):
        user.insert(0, f"## Conversation so far\n{sections['conversation_summary']}")
    if sections.get("kb_chunks"):
        user.append(f"## Knowledge base (excerpts)\n{sections['kb_chunks']}")
    return [
        {"role": "system", "content": sections["system"]},
        {"role": "user", "content": "\n\n".join(user)},
    ]
