"""The council's shared prompt: one prefix for every member, then each one's own part.

A council prompt is the part every member (and the planner) shares first: these rules, the
conversation so far, the KB chunks and the question; then the short part that differs (the
plan, who the member is, the answer format) last. Servers then reuse the shared prefix's KV
instead of reading it once per member: in process the batch engine copies it
(`collective.models.batch_engine`), llama-server reuses a slot's cached prefix (`cache_n`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from collective.budget.counting import ChatMessage
from collective.kb.evidence import SLICE

__all__ = ["OWN_PART", "SYSTEM", "compose", "finished", "own_part", "task_text"]

SYSTEM = """You are on a council of {k} specialists that answers a question from a knowledge \
base: a planner sets a strategy, each specialist answers on its own, then a judge writes the \
verdict.
Rules:
- Cite every claim that rests on a chunk with its tag exactly as shown, e.g. [KB#mem_0a1b2c3d].
- Never invent a tag; cite only tags that appear in the knowledge base below.
- If the knowledge base does not settle something, say so plainly.
Your own part in the council comes at the end."""
"""The same for the planner and every specialist (so it opens their shared prefix)."""

OWN_PART = "## Your part"
"""The heading of a role's own part: everything before it is shared."""


def task_text(question: str, own: str) -> str:
    """The task section: the question (shared), then the role's own part (last)."""
    return f"Question: {question}\n\n{own}"


def own_part(text: str) -> str:
    """The role's own part of a composed prompt's last message (empty when it has none)."""
    at = text.rfind(OWN_PART)
    return text[at:] if at >= 0 else ""


def compose(sections: Mapping[str, str]) -> list[ChatMessage]:
    """Messages from the fitted sections: the shared part first, the task (own part) last.

    With split evidence the KB section ends with the member's own slice (`SLICE` and its
    chunks): it goes after the question, just before the member's own part, so the shared
    prefix holds only the chunks every member reads.
    """
    user = []
    if sections.get("conversation_summary"):
        user.append(f"## Conversation so far\n{sections['conversation_summary']}")
    # -- evidence: the member's own slice after the shared prefix --
    kb, mark, own = (sections.get("kb_chunks") or "").partition(SLICE)
    task = sections["task"]
    if mark:
        at = task.rfind(OWN_PART)
        at = len(task) if at < 0 else at
        task = f"{task[:at].rstrip()}\n\n{SLICE}\n{own.strip()}\n\n{task[at:]}".rstrip()
    # -- end evidence --
    user.append(f"## Knowledge base\n{kb.strip() or '(no chunks retrieved)'}")
    user.append(f"## Task\n{task}")
    # Tools travel beside the messages (the backend's native tool calling), never as text here.
    return [
        {"role": "system", "content": sections["system"]},
        {"role": "user", "content": "\n\n".join(user)},
    ]


_SENTENCE_END = re.compile(r"[.!?](?:\s*\[[^\]\n]*\])*[.!?]?(?=\s|$)")


def finished(answer: str) -> str:
    """`answer` up to its last finished sentence: an output cap stopped it mid-way.

    A last line without a finished sentence goes whole, unless it is the only line.
    """
    if answer.endswith("\n"):
        return answer
    head, _, last = answer.rpartition("\n")
    ends = [m.end() for m in _SENTENCE_END.finditer(last)]
    if ends:
        return f"{head}\n{last[: ends[-1]]}" if head else last[: ends[-1]]
    return head if head.strip() else answer
