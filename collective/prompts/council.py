"""The council's shared prompt: one prefix for every member, then each one's own part.

A council prompt is the part every member (and the planner) shares first: these rules, the
conversation so far, the KB chunks and the question; then the short part that differs (the
plan, who the member is, the answer format) last. Servers then reuse the shared prefix's KV
instead of reading it once per member: in process the batch engine copies it
(`collective.models.batch_engine`), llama-server reuses a slot's cached prefix (`cache_n`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from collective.budget.assembly import SectionContent, Sections, text_section
from collective.budget.counting import ChatMessage

__all__ = [
    "OWN_PART",
    "SYSTEM",
    "Task",
    "compose",
    "finished",
    "task_part",
    "task_section",
    "task_text",
]

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
"""The heading a role's own part opens with (`Task.own`)."""


class Task(NamedTuple):
    """A role's task section: the question, the same for every role, then the role's own part."""

    shared: str
    own: str


def task_text(question: str, own: str) -> Task:
    """The task section: the question (shared), then the role's own part (composed last)."""
    return Task(f"Question: {question}", own)


def task_section(task: Task, alike: Sequence[Task] = ()) -> SectionContent:
    """The `task` section of `task`, sized alike with its siblings' (`text_section`)."""
    return text_section("task", task.shared, own=task.own, alike=[t.own for t in alike])


def compose(sections: Sections, before_own: str = "") -> list[ChatMessage]:
    """Messages from the fitted sections: the shared part first, the own parts last.

    The own parts (`Sections.own`: a member's own slice of split evidence, then the role's part
    of its task) go after the question, so the shared prefix holds only what every member reads;
    `before_own` goes between the two (the judge's tool rounds told as text).
    """
    user = []
    if sections.get("conversation_summary"):
        user.append(f"## Conversation so far\n{sections['conversation_summary']}")
    kb = sections.get("kb_chunks", "").strip() or "(no chunks retrieved)"
    user.append(f"## Knowledge base\n{kb}")
    user.append(f"## Task\n{task_part(sections, before_own)}")
    # Tools travel beside the messages (the backend's native tool calling), never as text here.
    return [
        {"role": "system", "content": sections["system"]},
        {"role": "user", "content": "\n\n".join(user)},
    ]


def task_part(sections: Sections, before_own: str = "") -> str:
    """The task as a role reads it: the shared question, `before_own`, then its own parts."""
    own = (sections.own.get(name, "").strip() for name in ("kb_chunks", "task"))
    return "\n\n".join(p for p in (sections["task"], before_own, *own) if p)


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
