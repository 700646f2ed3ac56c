"""The judge's prompt: the system message, then one user turn of parts.

In order: conversation context, task (with the planning context: plan and peer rankings),
knowledge base, specialist proposals, the evidence the specialists cited (when any), the
judge's own knowledge-base check (its last round after tool calls), synthesis instructions.
A draft whose cited claims fail the check gets one more turn after it (`revision_turn`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from collective.budget.counting import ChatMessage
from collective.kb.citations import neutralise

SYSTEM = """You are the judge of a council of specialists. Weigh their proposals against the \
knowledge base and write the verdict: the single best answer to the question.
- Prefer claims supported by the knowledge base; say where specialists disagree and who is right.
- Cite the chunks your verdict relies on by tag exactly as shown, e.g. [KB#mem_0a1b2c3d].
- Cite only tags shown in the knowledge base, the proposals or the evidence; never invent one.
- Evidence several members cite is better supported than a chunk only one member saw.
- State numbers and names exactly as the cited chunk states them."""

FORMAT = """first the direct answer in one short sentence, then at most three short reasons, \
one per line, each ending with the tag of the chunk it comes from, copied exactly from the \
knowledge base: `- <reason> [KB#<id>]`. If the verdict settles a choice later questions should \
build on, end with one line `Decision: <the choice>`."""
"""The verdict's shape, last in every round (a small judge follows the end of its prompt best),
with the tag format spelled out: told only "with citations", the 1.5B judge wrote no tag."""

SYNTHESIS = f"Write the verdict now, with no tool call: {FORMAT}"

VERIFY = f"""You have knowledge-base tools. Before you rule, check the claim your verdict will \
rest on: call kb_search (or kb_get for a tag you want in full) once. Then write the verdict: \
{FORMAT}"""
"""Asked in the first round when tools are offered: small models otherwise skip verifying (and
one that rules at once still gets the verdict's shape)."""


REVISE = f"""Some cited claims of your draft verdict state numbers or names that their cited \
chunk does not state (listed above with the chunks). Rewrite the verdict: state each number and \
name exactly as its chunk states it, cite the chunk each claim comes from, and leave out any \
claim no chunk supports. Write it now, with no tool call: {FORMAT}"""
"""The check of each cited claim against its chunk, asked once when a claim failed it."""


_FAILING, _SAYS = "Claims of your draft their chunks do not support:", "its chunk says"
_CHECK_WORDS = (_FAILING, _SAYS)


def echoes_check(answer: str) -> bool:
    """Whether `answer` repeats the check of `revision_turn` instead of being a verdict."""
    return any(words in answer for words in _CHECK_WORDS)


def revision_turn(
    problems: list[tuple[str, list[str], tuple[str, ...]]], keep: Iterable[str]
) -> str:
    """The user turn after the draft verdict: each unsupported claim, its chunks, what to do.

    It follows the draft (the judge's own turn), so the call reads on from the draft's prompt
    and the server reuses all of it. A claim is model output: it is neutralised except for the
    tags of `keep` (chunks the judge was shown), so it cannot show the judge a tag of anything
    else.
    """
    keep = list(keep)
    lines = [f"## Check of your draft\n{_FAILING}"]
    for claim, chunks, missing in problems:
        lines.append(f"- {neutralise(claim, keep)!r} states {', '.join(missing)}; {_SAYS}:")
        lines += [f"  {chunk}" for chunk in chunks]
    return "\n".join(lines) + f"\n\n## Synthesis instructions\n{REVISE}"


def task_text(question: str, plan: str, ranking: str = "") -> str:
    """The task framing with the planning context (plan and peer rankings) after it.

    The plan is model output: it is neutralised so that it cannot show the judge a tag.
    """
    text = question
    planning = "\n\n".join(p for p in (neutralise(plan), ranking) if p)
    if planning:
        text += f"\n\n## Planning context\n{planning}"
    return text


def compose(
    sections: Mapping[str, str], verify: bool = False, checked: str = ""
) -> list[ChatMessage]:
    """Messages from the fitted sections.

    Args:
        sections: The fitted sections by name.
        verify: Ask for a tool check before the verdict (tools on offer).
        checked: The judge's tool rounds told as text (the final round, no tools on offer):
            shown just before the instructions, in the same user turn.
    """
    user = [
        f"## Conversation context\n{sections.get('conversation_summary') or '(new conversation)'}",
        f"## Task\n{sections['task']}",
        f"## Knowledge base\n{sections.get('kb_chunks') or '(no chunks retrieved)'}",
        f"## Specialist proposals\n{sections.get('proposals') or '(none)'}",
    ]
    if sections.get("evidence"):
        user.append(f"## Evidence cited by the specialists\n{sections['evidence']}")
    if checked:
        user.append(f"## Your knowledge-base check\n{checked}")
    instructions = VERIFY if verify else SYNTHESIS
    user.append(f"## Synthesis instructions\n{instructions}")
    # Tools travel beside the messages (the backend's native tool calling), never as text here.
    return [
        {"role": "system", "content": sections["system"]},
        {"role": "user", "content": "\n\n".join(user)},
    ]
