"""The judge's prompt: the council's shared root, then the judge's own part.

The judge reads what every member read first, in the same tokens (`collective.prompts.council`:
rules, conversation, KB chunks, the question), so a judge on the members' model reuses their
prefix; then its knowledge-base check when it used tools, and its part: its own answer from the
KB. It is not shown the members' answers: they are weighed against its answer by the claim
check (`collective.verdict.agreement.decide`), which a small judge does better than merging them. A
draft whose claims fail the check gets one more turn after it (`revision_turn`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from collective.budget.assembly import Sections
from collective.budget.counting import ChatMessage
from collective.kb.citations import SHOWN_SCORE, neutralise, parse_citations, without_tags
from collective.kb.quantities import Quantity, quantities, same_quantity
from collective.prompts import council

__all__ = [
    "FORMAT",
    "LINES",
    "MAX_TOKENS",
    "SYSTEM",
    "clean",
    "compose",
    "echoes_check",
    "revision_turn",
    "task_text",
]

SYSTEM = council.SYSTEM
"""The council's rules (`SYSTEM.format(k=...)`): the judge's prompt opens like the members'."""

LINES = 3
"""The lines `FORMAT` allows (the answer and two reasons): the 1.5B wrote eight from ten chunks."""

MAX_TOKENS = 256
"""The judge's output cap: three lines of quoted sentences (the demo's three came to about 190
tokens). Uncapped, the 1.5B went on to eight lines, some 500 tokens, most of its call's time."""

FORMAT = """Find the chunk that addresses the question most directly. Copy the one sentence \
of it that answers the question, ending with that chunk's tag copied exactly. Then give at most \
two reasons, one per line starting with "- ", each a sentence of the chunks, ending with its \
chunk's tag. Write each thing once."""
"""The verdict's shape, last in every round (a small judge follows the end of its prompt best).
Measured on the demo KB with the 1.5B: asked to write its answer, it named PLA for a hot car
("PLA should be used ... because it softens near 55-60 °C"), looped, or left every question
unanswered; asked to find the chunk and copy its answering sentence, it answered all three.
It holds no placeholder a small judge could copy (`<reason>`) and asks for no `Decision:` line:
the 1.5B wrote "Decision: PLA" under a verdict for ASA."""

_OWN = f"""{council.OWN_PART}
You are the judge."""

VERIFY = "You have knowledge-base tools: call kb_search or kb_get once to check the claim your \
verdict rests on, then write the verdict."

REVISE = """Some claims of your draft are not what their cited chunk says (listed above). \
Rewrite the verdict: state each claim as its chunk states it, cite the chunk it comes from, and \
leave out any claim no chunk supports."""

_FAILING, _SAYS = "Claims of your draft their chunks do not support:", "its chunk says"
_CHECK_WORDS = (_FAILING, _SAYS)


def echoes_check(answer: str) -> bool:
    """Whether `answer` repeats the check of `revision_turn` instead of being a verdict."""
    return any(words in answer for words in _CHECK_WORDS)


def revision_turn(problems: Sequence[tuple[str, str, Sequence[str]]], keep: Sequence[str]) -> str:
    """The user turn after the draft verdict: each failed claim, why, what its chunk says.

    It follows the draft (the judge's own turn), so the call reads on from the draft's prompt
    and the server reuses all of it. `problems` are `(claim, why, sentences)`: the sentences of
    its chunk, as the judge was shown them, that come nearest to it. A claim is model output:
    it is neutralised except for the tags of `keep` (chunks the judge was shown).
    """
    lines = [f"## Check of your draft\n{_FAILING}"]
    for claim, why, said in problems:
        lines.append(f"- {neutralise(claim, keep)!r}: {why}")
        lines += [f"  {_SAYS}: {neutralise(s)}" for s in said]
    return "\n".join(lines) + f"\n\n{council.OWN_PART}\n{REVISE}\n{FORMAT}"


def task_text(question: str, verify: bool = False) -> council.Task:
    """The task: the question (as the members read it), then the judge's own part."""
    own = "\n".join(p for p in (_OWN, VERIFY if verify else "", FORMAT) if p)
    return council.task_text(question, own)


def compose(sections: Sections, checked: str = "") -> list[ChatMessage]:
    """Messages from the fitted sections: the council's root, then the judge's part.

    Args:
        sections: The fitted sections by name (`system`, `conversation_summary`, `kb_chunks`,
            `task`).
        checked: The judge's tool rounds told as text (the final round, no tools on offer): they
            go after the question, before the judge's part.
    """
    return council.compose(sections, f"## Your knowledge-base check\n{checked}" if checked else "")


# -- what the verdict must not hold ----------------------------------------------------------

_META_LEAD_IN = re.compile(
    r"^\W*(?:[\w ]{0,40}\b(?:answer|verdict|sentence|summary|conclusion|reasons?)\b"
    r"[\w ]{0,40}):\s+",
    re.IGNORECASE,
)
"""A first line's lead-in that talks about the answer rather than giving it ("The direct answer
in one short sentence: ...", "Final verdict: ...")."""
_LABEL = re.compile(
    r"^(?P<bullet>\s*(?:[-*•]\s+)?)(?:\*\*|__)?(?:(?:final |direct |short )?answer|verdict|"
    r"reasons?(?: \d+)?|summary|conclusion)(?:\*\*|__)?\s*:(?:\*\*|__)?\s*",
    re.IGNORECASE,
)
"""A label a small model puts before a line of its answer ("**Answer:**", "- Reason 1:"), or a
line that is only one ("Reasons:")."""
_COPIED_CHUNK = re.compile(
    r"^(?P<bullet>\s*(?:[-*•]\s+)?)(?P<tags>(?:\[KB#[^\]\s]+\]\s*)+)"
    rf"(?:{SHOWN_SCORE}\s*)?"
    r"(?:[-–—:]\s*)?(?P<rest>\S.*)$"
)
"""A line written the way the prompt shows a chunk (`[KB#id] [Score: 0.85] heading: text`)."""
_PLACEHOLDER = re.compile(r"<[a-z][a-z \-]{0,30}>|\[KB#<[^>\]]*>\]", re.IGNORECASE)
_TOOL_OUTPUT = re.compile(r"\(its text is in the knowledge base above\)|^\s*no (?:more )?chunks?\b")


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _copied_spans(line: str, source_words: set[tuple[str, ...]], n: int = 5) -> bool:
    words = _words(line)
    return any(tuple(words[i : i + n]) in source_words for i in range(len(words) - n + 1))


def _short_echo(line: str, prompt_words: Sequence[str]) -> bool:
    """Whether `line` is three or four words copied in a row from the prompt ("You are the judge.").

    Too short for `_copied_spans`'s five-word runs, and no answer.
    """
    words = _words(line)
    return 3 <= len(words) < 5 and any(f" {' '.join(words)} " in told for told in prompt_words)


def _ngrams(texts: Sequence[str], n: int = 5) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for text in texts:
        words = _words(text)
        out.update(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return out


def _as_claim(line: str, headings: Sequence[str]) -> str:
    """A line copied in a chunk's shown form (tag, score, heading first) as text, then tags."""
    found = _COPIED_CHUNK.match(line)
    if not found:
        return line
    rest = found["rest"].strip()
    for heading in sorted({p.strip() for h in headings for p in (h, *h.split(">"))}, key=len,
                          reverse=True):  # fmt: skip
        if heading and rest.lower().startswith(f"{heading.lower()}:"):
            rest = rest[len(heading) + 1 :].strip()
            break
    end = "." if rest.endswith(".") else ""
    return f"{found['bullet']}{rest.removesuffix('.')} {found['tags'].strip()}{end}"


def clean(
    answer: str,
    instructions: Sequence[str],
    tool_output: Sequence[str] = (),
    headings: Sequence[str] = (),
    most_lines: int = 0,
    cut: bool = False,
) -> str:
    """`answer` without what a reader counts as no answer, and each sentence once.

    Left out: a lead-in that echoes the instructions ("The direct answer in one short sentence:
    ..."; what follows it stays), a template placeholder (`<reason>`), a line of a tool's output,
    a line or sentence said before (or a line citing the chunks of an earlier one for figures it
    already gave, in other words), anything after `Decision:` but that line, and the lines after
    `most_lines` (0: no limit), which the answer format asked for. A line copied
    in the form the prompt shows a chunk (`[KB#id] - heading: text`) becomes its text, then its
    tag.

    Args:
        answer: The judge's text.
        instructions: The prompt's own instruction texts (format lines, its part).
        tool_output: What the judge's tools returned.
        headings: The headings of the chunks shown.
        most_lines: The most lines the format allows (0: any number).
        cut: The answer stopped at its output cap: its unfinished last sentence is left out.
    """
    if cut:
        answer = council.finished(answer)
    told, lead_ins = _ngrams(instructions), _ngrams(instructions, n=4)
    prompt_words = [f" {' '.join(_words(text))} " for text in instructions]
    tools = _ngrams(tool_output, n=6)
    lines: list[str] = []
    seen: set[str] = set()
    stated: list[tuple[frozenset[str], tuple[Quantity, ...]]] = []
    for raw in answer.splitlines():
        line = _as_claim(_PLACEHOLDER.sub("", raw).rstrip(), headings)
        line = _LABEL.sub(lambda m: m.group("bullet"), line)
        if not lines:
            line = _META_LEAD_IN.sub("", line)
        if not line.strip(" -*•"):
            continue
        if _TOOL_OUTPUT.search(line) or _copied_spans(line, tools, n=6):
            continue
        # an echoed lead-in: drop the words up to its colon, keep the answer after it
        head, colon, rest = line.partition(":")
        if colon and _copied_spans(head, lead_ins, n=4) and rest.strip():
            line = f"{head[: len(head) - len(head.lstrip(' -*•'))]}{rest.strip()}"
        elif _copied_spans(line, told) or _short_echo(line, prompt_words):
            continue
        kept = []
        for sentence in re.split(r"(?<=[.!?])\s+", line):
            key = " ".join(w for w in _words(re.sub(r"\[[^\]]*\]", "", sentence)))
            if key and any(key in said for said in seen):  # said before, or a cut-off repeat
                continue
            seen.add(key)
            kept.append(sentence)
        line = " ".join(kept).rstrip()
        if not line.strip(" -*•"):
            continue
        facts = _facts(line)
        if any(_restates(facts, said) for said in stated):
            continue
        stated.append(facts)
        lines.append(line)
        if line.lstrip(" -*•").startswith("Decision:") or len(lines) == most_lines:
            break
    return "\n".join(lines).strip()


def _facts(line: str) -> tuple[frozenset[str], tuple[Quantity, ...]]:
    """The chunks a line cites and the figures it gives."""
    return frozenset(parse_citations(line)), quantities(without_tags(line))


def _restates(
    facts: tuple[frozenset[str], tuple[Quantity, ...]],
    said: tuple[frozenset[str], tuple[Quantity, ...]],
) -> bool:
    """Whether a line with `facts` gives, from the same chunks, only figures `said` gave.

    The same figure, not one a given range holds (`about 260 °C` of `250-280 °C` says more).
    """
    (cited, figures), (said_cited, said_figures) = facts, said
    return bool(cited and figures and cited <= said_cited) and all(
        any(same_quantity(figure, given) and same_quantity(given, figure) for given in said_figures)
        for figure in figures
    )
