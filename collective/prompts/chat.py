"""The prompt of `collective chat`: one model, the conversation memory, the user's line."""

from __future__ import annotations

from collections.abc import Mapping

from collective.budget.counting import ChatMessage

SYSTEM = """You are a helpful assistant in a conversation. Answer the user's latest message \
directly and concisely, using the conversation so far where it matters. If you do not know, \
say so. For questions that need the knowledge base and several opinions, the user can ask the \
council with /collective."""


def compose(sections: Mapping[str, str]) -> list[ChatMessage]:
    """Messages from the fitted sections: system, then the conversation and the new line."""
    user = []
    if sections.get("conversation_summary"):
        user.append(f"## Conversation so far\n{sections['conversation_summary']}")
        user.append(f"## My message\n{sections['task']}")
    else:
        user.append(sections["task"])
    return [
        {"role": "system", "content": sections["system"]},
        {"role": "user", "content": "\n\n".join(user)},
    ]
