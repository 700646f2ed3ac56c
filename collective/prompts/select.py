"""The `select` arm's prompt (universal self-consistency).

The judge's model is shown the candidate answers, anonymised, and names the one the others
agree with most.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collective.budget.counting import ChatMessage

__all__ = ["OUTPUT_CAP", "SYSTEM", "compose", "schema", "task_text"]

SYSTEM = (
    "You compare answers to one question. You do not answer it yourself: you say which answer "
    "the others agree with most."
)

TASK = """Question: {question}

Which response is the most consistent with the other responses: the answer most of them give, \
with the same thing named and the same figures? Answer only with a JSON object: \
{{"most_consistent": "Response A"}}."""

OUTPUT_CAP = 32
"""A label in a short JSON object."""


def task_text(question: str) -> str:
    """The task section: the question and what to name."""
    return TASK.format(question=question)


def schema(labels: list[str]) -> dict[str, Any]:
    """The answer's JSON schema: one of the labels shown."""
    return {
        "type": "object",
        "properties": {"most_consistent": {"type": "string", "enum": labels}},
        "required": ["most_consistent"],
    }


def compose(sections: Mapping[str, str]) -> list[ChatMessage]:
    """Messages from the fitted sections: the responses, then the task."""
    user = f"## Responses\n{sections.get('proposals', '')}\n\n## Task\n{sections['task']}"
    return [
        {"role": "system", "content": sections["system"]},
        {"role": "user", "content": user},
    ]
