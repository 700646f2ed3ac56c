"""The judge's prompt: seven parts, the evidence the specialists cited among them.

In order: conversation context, task, planning context (in the task allocation),
knowledge base, specialist proposals, evidence, synthesis instructions.
"""

from __future__ import annotations

from collections.abc import Mapping

from collective.budget.counting import ChatMessage
from collective.kb.citations import neutralise

SYSTEM = """You are the judge of a council of specialists. Weigh their proposals against the \
knowledge base and write the verdict: the single best answer to the question.
- Prefer claims supported by the knowledge base; say where specialists disagree and who is right.
- Cite the chunks your verdict relies on by tag exactly as shown, e.g. [KB#mem_0a1b2c3d].
- Cite only tags shown in the knowledge base or evidence sections; never invent one."""

SYNTHESIS = """Write the verdict now: a direct answer first, then the reasons, with citations. \
If the verdict settles a choice later questions should build on, end with one line \
`Decision: <the choice>`."""

VERIFY = """You have knowledge-base tools. Before you rule, check the claim your verdict will \
rest on: call kb_search (or kb_get for a tag you want in full) once, then write the verdict."""
"""Asked in the first round when tools are offered: small models otherwise skip verifying."""


def task_text(question: str, plan: str, ranking: str = "") -> str:
    """The task framing with the planning context (plan and peer rankings) after it.

    The plan is model output: it is neutralised so that it cannot show the judge a tag.
    """
    text = question
    planning = "\n\n".join(p for p in (neutralise(plan), ranking) if p)
    if planning:
        text += f"\n\n## Planning context\n{planning}"
    return text


def compose(sections: Mapping[str, str], verify: bool = False) -> list[ChatMessage]:
    """Messages from the fitted sections (`verify`: ask for a tool check before the verdict)."""
    user = [
        f"## Conversation context\n{sections.get('conversation_summary') or '(new conversation)'}",
        f"## Task\n{sections['task']}",
        f"## Knowledge base\n{sections.get('kb_chunks') or '(no chunks retrieved)'}",
        f"## Specialist proposals\n{sections.get('proposals') or '(none)'}",
    ]
    if sections.get("evidence"):
        user.append(f"## Evidence cited by the specialists\n{sections['evidence']}")
    user.append(f"## Synthesis instructions\n{VERIFY if verify else SYNTHESIS}")
    # Tools travel beside the messages (the backend's native tool calling), never as text here.
    return [
        {"role": "system", "content": sections["system"]},
        {"role": "user", "content": "\n\n".join(user)},
    ]
