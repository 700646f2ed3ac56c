"""The peer-review prompt: a specialist ranks the other proposals, anonymised.

The council's rules open it, as every member's prompt (`collective.prompts.council`); the
reviewer's name and instructions come last.
"""

from __future__ import annotations

import string
from typing import Any

from pydantic import BaseModel, Field

from collective.budget.assembly import Sections
from collective.budget.counting import ChatMessage
from collective.prompts import council

SYSTEM = council.SYSTEM
"""Shared with the members: `SYSTEM.format(k=...)` (a `member=` argument is ignored)."""

OWN = f"""{council.OWN_PART}
You are {{member}}. Rank the other specialists' answers to the question, best first, for \
accuracy, support from the knowledge base, and completeness.
Answer only with a JSON object: {{{{"ranking": ["Response A", ...], "reason": "one sentence"}}}}, \
listing every response label exactly once."""
"""The reviewer's own part, last: `OWN.format(member=...)`."""


class PeerRanking(BaseModel):
    """A reviewer's structured answer (the JSON schema the backend constrains output to)."""

    ranking: list[str] = Field(description="Every response label, best first.")
    reason: str = Field(default="", description="One sentence on the top choice.")


def ranking_schema(shown: list[str]) -> dict[str, Any]:
    """`PeerRanking`'s JSON schema with `ranking` held to the labels shown, each once in size.

    Under a grammar built from it a small model ranks every response (an empty ranking, which
    the plain schema allows, is what Qwen2.5-Coder 0.5B wrote).
    """
    schema = PeerRanking.model_json_schema()
    schema["properties"]["ranking"] = {
        **schema["properties"]["ranking"],
        "items": {"type": "string", "enum": shown},
        "minItems": len(shown),
        "maxItems": len(shown),
    }
    return schema


def labels(n: int) -> list[str]:
    """`Response A`, `Response B`, ... for n anonymised proposals."""
    return [f"Response {string.ascii_uppercase[i]}" for i in range(n)]


def task_text(question: str, member: str) -> council.Task:
    """The task section: the question, then the reviewer's own part."""
    return council.task_text(question, OWN.format(member=member))


def compose(sections: Sections) -> list[ChatMessage]:
    """Messages from the fitted sections: the responses before the task (own part last)."""
    user = [
        f"## Responses\n{sections.get('proposals', '')}",
        f"## Task\n{council.task_part(sections)}",
    ]
    if sections.get("conversation_summary"):
        user.insert(0, f"## Conversation so far\n{sections['conversation_summary']}")
    user.append("Reply with the JSON object only.")
    return [
        {"role": "system", "content": sections["system"]},
        {"role": "user", "content": "\n\n".join(user)},
    ]
