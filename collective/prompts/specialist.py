"""A specialist's prompt: the council's shared prefix, then the plan and the member's own part.

Everything before `## Your part` is the same for every member (`collective.prompts.council`),
so a server reads it once; the member's name and the answer format come last.
"""

from __future__ import annotations

from collective.kb.citations import neutralise
from collective.prompts import council

__all__ = ["ANSWER", "ANSWER_AGAIN", "MAX_TOKENS", "SYSTEM", "compose", "task_text"]

SYSTEM = council.SYSTEM
"""Shared by all members: `SYSTEM.format(k=...)` (a `member=` argument is ignored)."""

compose = council.compose

ANSWER = """Answer now. Start with one short sentence that names the answer, then give at most \
three reasons, one per line starting with "- ", each stating what its chunk says and ending with \
that chunk's tag copied exactly from the knowledge base. Write each thing once."""
"""Last in the prompt, the tag format spelled out (small members otherwise rarely cite; the
system prompt shows an example tag) and no placeholder a small model could copy (`<reason>`)."""
ANSWER_AGAIN = """Answer now. Start with one short sentence that names the answer, then give at \
most three reasons, each on its own line as a bullet, each stating what its chunk says and ending \
with that chunk's tag copied exactly from the knowledge base. Write each thing once."""
"""`ANSWER` with the bullet not written out, asked of a member whose answer was bullets alone:
the 1.5B copies the quoted "- " in a loop to its cap on some prompts at every temperature (12
of 104 samples on the held-out questions of bench/README.md); this wording answered on each."""


MAX_TOKENS = 128
"""A member's output cap where the config sets none: the answer `ANSWER` asks for (a sentence
and three reasons, each with its tag, about 30 tokens a line), and the cap of the bundled
eval's members, the table the default follows. Uncapped, members of the 1.5B without a plan
wrote 186-227 tokens on `make demo` (copying chunks whole), all decoded beside the judge's own
answer."""


def task_text(
    question: str, plan: str, member: str | None, k: int = 0, answer: str = ANSWER
) -> council.Task:
    """The task: the question, the council's plan (neutralised: model text), the member's part.

    The question and the plan are the same for every member; only the part after
    `council.OWN_PART` names the member, and its angle where there is a plan. Same-prompt
    samples (`member` None, no plan) are named by none: one prompt serves them all.
    """
    of = f"one of {k} specialists on the council" if k else ""
    who = ", ".join(part for part in (member, of) if part) or "a specialist"
    follow = "Follow your angle from the council's plan, but answer" if plan else "Answer"
    task = council.task_text(
        question, f"{council.OWN_PART}\nYou are {who}. {follow} the whole question.\n{answer}"
    )
    if plan:  # shared by every member, after the question
        task = task._replace(shared=f"{task.shared}\n\n## Council plan\n{neutralise(plan)}")
    return task
