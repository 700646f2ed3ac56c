"""A specialist's prompt: answer the question from the KB, citing chunks by tag."""

from __future__ import annotations

from collections.abc import Mapping

from collective.budget.counting import ChatMessage
from collective.kb.citations import neutralise

SYSTEM = """You are {member}, one of {k} specialists on a council. Answer the question \
accurately and concisely from the knowledge-base chunks you are given.
Rules:
- Cite every claim that rests on a chunk with its tag exactly as shown, e.g. [KB#mem_0a1b2c3d].
- Never invent a tag; cite only tags that appear in the knowledge base below.
- If the knowledge base does not settle something, say so plainly.
- Follow your angle from the council's plan, but answer the whole question."""


def compose(sections: Mapping[str, str]) -> list[ChatMessage]:
    """Messages from the fitted sections: system rules, then context and the task."""
    user = []
    if sections.get("conversation_summary"):
        user.append(f"## Conversation so far\n{sections['conversation_summary']}")
    user.append(f"## Knowledge base\n{sections.get('kb_chunks') or '(no chunks retrieved)'}")
    user.append(f"## Task\n{sections['task']}")
    # Tools travel beside the messages (the backend's native tool calling), never as text here.
    return [
        {"role": "system", "content": sections["system"]},
        {"role": "user", "content": "\n\n".join(user)},
    ]


ANSWER = """Answer now: first the direct answer in one short sentence, then at most three \
short reasons, one per line, each ending with the tag of the chunk it comes from, copied exactly \
from the knowledge base: `- <reason> [KB#<id>]`."""
"""Last in the prompt, the tag format spelled out: small members otherwise rarely cite."""


def task_text(question: str, plan: str, member: str) -> str:
    """The task framing: the question, the council's plan (neutralised: model text), the format."""
    text = f"Question: {question}"
    if plan:
        text += f"\n\nCouncil plan (you are {member}):\n{neutralise(plan)}"
    return f"{text}\n\n{ANSWER}"
