"""A verdict a reader can trust: no echo, no tool output, no repeat; selected by support.

The judge and members are scripted (a model that echoes its format on demand cannot be had for
real); the council's own nodes, prompts and checks run as in a real run.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from collective.budget.counting import tiktoken_counter
from collective.budget.trimming import Scored
from collective.errors import QuorumError
from collective.graph import build_graph
from collective.kb.evidence import split
from collective.kb.store import Chunk
from collective.models.base import ChatDelta
from collective.prompts import judge as judge_prompt
from collective.verdict.agreement import Asked, check_answer, decide
from collective.verdict.support import shown_whole
from tests.fakes import ListStore, ScriptedBackend
from tests.unit.test_graph_council import context
from tests.verdicts import direct, quoted

ABS = Chunk(
    "mem_abs",
    "ABS is tough and handles heat to around 95-100 °C, so it suits automotive interior parts.",
    "abs.md",
    score=0.9,
    heading="ABS and ASA > ABS properties",
)
NYLON = Chunk(
    "mem_nylon",
    "Nylon is tough, wear resistant and has low friction, which suits gears, hinges and "
    "bushings. It is the most hygroscopic common filament.",
    "nylon.md",
    score=0.7,
    heading="Nylon > Engineering",
)
PLA = Chunk(
    "mem_pla",
    "PLA softens near 55-60 °C, so parts sag in hot cars.",
    "pla.md",
    score=0.8,
    heading="PLA > Heat",
)
KB = ListStore([ABS, NYLON, PLA])
QUESTION = "Which filament should I use for a part that sits in a hot car, and why?"


async def ask(judge: str | ScriptedBackend, member: str = "ABS [KB#mem_abs].", **kw):
    judge = judge if isinstance(judge, ScriptedBackend) else ScriptedBackend("judge", judge)
    ctx = context(
        judge=judge,
        specialists=[ScriptedBackend("spec", member)],
        knowledge=KB,
        judge_tools=False,
        **kw,
    )
    return await build_graph().ainvoke({"question": QUESTION}, context=ctx)


async def test_the_demos_nylon_paragraph_under_an_abs_tag_is_dropped_and_said_once() -> None:
    # measured on `make demo`: the nylon chunk's sentences with "Nylon" made "ABS", cited to
    # the ABS chunk, one of them twice; the old check passed both
    verdict = (
        "ABS handles heat to around 95-100 °C [KB#mem_abs].\n"
        "- ABS is the most hygroscopic common filament [KB#mem_abs]\n"
        "- ABS is the most hygroscopic common filament [KB#mem_abs]\n"
        "- ABS is tough, wear resistant and has low friction, which suits gears [KB#mem_abs]"
    )
    out = await ask(verdict)
    assert "hygroscopic" not in out["answer"] and "friction" not in out["answer"]
    assert out["answer"].count("95-100") == 1
    statuses = [c["status"] for c in out["claims"]]
    assert statuses.count("dropped") == 2 and "dropped" not in statuses[2:]
    assert out["citation_support"] == 1.0
    pla = "- PLA softens near 55-60 °C, so parts sag in hot cars. [KB#mem_pla]"
    assert quoted(out, [ABS, NYLON, PLA]) == [pla]


@pytest.mark.parametrize(
    "echo",
    [
        "The direct answer in one short sentence: ABS handles heat to around 95-100 °C "
        "[KB#mem_abs].",
        "Start with one short sentence that names the answer: ABS handles heat to around "
        "95-100 °C [KB#mem_abs].",
        "ABS handles heat to around 95-100 °C [KB#mem_abs].\n- <reason> [KB#<id>]",
        "ABS handles heat to around 95-100 °C [KB#mem_abs].\n"
        "- Nylon > Engineering (its text is in the knowledge base above) [KB#mem_nylon]",
        "ABS handles heat to around 95-100 °C [KB#mem_abs]. ABS handles heat to around "
        "95-100 °C [KB#mem_abs].",
        # measured on the demo KB: a line said again, cut off before its end
        "ABS handles heat to around 95-100 °C [KB#mem_abs].\n- ABS handles heat to around "
        "[KB#mem_abs]",
        # measured on the eval: the 1.5B wrote its claims the way the prompt shows a chunk
        "[KB#mem_abs] [Score: 0.90] ABS and ASA > ABS properties: ABS handles heat to around "
        "95-100 °C.",
    ],
)
async def test_a_verdict_never_echoes_its_format_a_placeholder_or_tool_output(echo: str) -> None:
    out = await ask(echo)
    assert direct(out) == "ABS handles heat to around 95-100 °C [KB#mem_abs]."
    quoted(out, [ABS, NYLON, PLA])  # the rest: the chunks' own sentences, never the echo


def test_clean_drops_the_labels_a_small_model_puts_on_its_lines() -> None:
    # measured on `make demo`: "Reason 1:" made a claim of the number 1, which no chunk states
    told = [*judge_prompt.task_text("Which filament for a hot car?")]
    text = (
        "- **Answer:** ABS.\nReasons:\n- **Reason 1:** It handles heat.\n- Reason 2: It is tough."
    )
    assert judge_prompt.clean(text, told) == "- ABS.\n- It handles heat.\n- It is tough."


async def test_a_verdict_ends_at_the_lines_its_format_allows() -> None:
    # measured on `make demo` with balanced retrieval: the 1.5B asked for an answer and two
    # reasons wrote eight lines, the last about abrasive nozzles
    lines = [
        "ABS handles heat to around 95-100 °C [KB#mem_abs].",
        "- PLA softens near 55-60 °C, so parts sag in hot cars [KB#mem_pla]",
        "- ABS is used for automotive interior parts [KB#mem_abs]",
        "- Nylon is tough, wear resistant and has low friction [KB#mem_nylon]",
    ]
    out = await ask("\n".join(lines))
    # the model's direct answer, then at most three of the chunks' own sentences on the question
    assert direct(out) == lines[0]
    assert len(quoted(out, [ABS, NYLON, PLA])) <= 3 and "Nylon" not in out["answer"]


async def test_a_verdict_cut_at_its_output_cap_ends_at_its_last_finished_sentence() -> None:
    # measured on `make demo`: the draft stopped at its 256 tokens inside a quoted sentence, and
    # "- PLA ... about 55-60 °C; its heat deflection temperature [KB#...]" stood as its last line
    class CutJudge(ScriptedBackend):
        async def chat(self, messages, **kwargs):
            result = await super().chat(messages, **kwargs)
            return dataclasses.replace(result, finish_reason="length")

    said = (
        "ABS handles heat to around 95-100 °C [KB#mem_abs].\n"
        "- PLA softens near 55-60 °C [KB#mem_pla]. Parts sag in hot"
    )
    out = await ask(CutJudge("judge", said))
    assert direct(out) == "ABS handles heat to around 95-100 °C [KB#mem_abs]."
    assert "Parts sag in hot\n" not in f"{out['answer']}\n"
    quoted(out, [ABS, NYLON, PLA])  # whole sentences of the chunks
    # a last line with no finished sentence goes whole; a lone line stays as it is
    cut = "ABS handles heat to around 95-100 °C [KB#mem_abs].\n- PLA softens near 55"
    assert (
        judge_prompt.clean(cut, [], cut=True)
        == "ABS handles heat to around 95-100 °C [KB#mem_abs]."
    )
    assert judge_prompt.clean(cut, []) == cut
    assert (
        judge_prompt.clean("ABS handles heat to around", [], cut=True)
        == "ABS handles heat to around"
    )


def test_clean_keeps_the_answer_after_an_echoed_lead_in() -> None:
    told = [*judge_prompt.task_text("Which filament for a hot car?")]
    text = "Start with one short sentence that names the answer: ABS.\nDecision: ABS\nThanks!"
    assert judge_prompt.clean(text, told) == "ABS.\nDecision: ABS"


def test_clean_drops_a_short_line_copied_from_the_prompt() -> None:
    # measured through the Agent Server: gemma-3-270m's verdict began with the prompt's own
    # "You are the judge.", which stood as the whole answer
    told = [*judge_prompt.task_text("Is PLA a good choice for a part in a hot car?")]
    text = "You are the judge.\nIs PLA a good choice?\nPLA softens near 55 C [KB#mem_pla]."
    assert judge_prompt.clean(text, told) == "PLA softens near 55 C [KB#mem_pla]."
    assert judge_prompt.clean("PLA is a poor choice.", told) == "PLA is a poor choice."


def test_clean_drops_a_line_that_gives_an_earlier_lines_figures_again_in_other_words() -> None:
    # measured on the eval's wide questions: the 1.5B's answer to "which prints at the lowest
    # nozzle temperature" said PA6 nylon's 250-280 °C twice from one chunk, worded apart
    text = (
        "- PA6 nylon prints at a nozzle temperature of 250-280 °C with the bed at 70-90 °C "
        "[KB#mem_pa6].\n"
        "- Polypropylene prints at a nozzle temperature of 220-250 °C [KB#mem_pp].\n"
        "- PA6 nylon has a nozzle temperature of 250-280 °C [KB#mem_pa6].\n"
        "- PA6 nylon is best started at 260 °C [KB#mem_pa6].\n"
        "- PETG also prints at 250-280 °C [KB#mem_petg]."
    )
    lines = judge_prompt.clean(text, []).splitlines()
    assert lines == [text.splitlines()[i] for i in (0, 1, 3, 4)]  # a figure inside a range, or
    # the same figure from another chunk, says something new


async def test_a_member_answer_stands_when_the_judge_has_nothing_supported() -> None:
    out = await ask(
        "PETG is best, it melts at 400 °C [KB#mem_abs].",
        member="ABS handles heat to around 95-100 °C [KB#mem_abs].",
    )
    assert direct(out) == "ABS handles heat to around 95-100 °C [KB#mem_abs]."
    assert out["claim_check"]["selected"] == "specialist-1"
    assert any("specialist-1's answer stands" in note for note in out["notes"])


def test_the_peer_reviews_ranks_break_a_tie_between_member_answers() -> None:
    shown = shown_whole({ABS.id: ABS})
    judge = check_answer("judge", "ABS melts at 400 °C [KB#mem_abs].", shown)
    said = "ABS handles heat to around 95-100 °C [KB#mem_abs]."
    members = [check_answer(f"specialist-{i}", said, shown) for i in (1, 2)]
    asked = Asked("Which filament for a hot car?")
    first = decide(asked, [judge, *members], None).stands
    assert first is not None and first.who == "specialist-1"  # first on a tie
    ranked = decide(asked, [judge, *members], None, {"specialist-1": 2.0, "specialist-2": 1.0})
    assert ranked.stands is not None and ranked.stands.who == "specialist-2"
    assert "2 of 2 supported answers give it" in ranked.why


async def test_with_no_supported_claim_anywhere_the_verdict_says_the_kb_does_not_answer() -> None:
    out = await ask("It melts at 400 °C [KB#mem_abs].", member="It melts at 500 °C [KB#mem_abs].")
    assert out["answer"].startswith("The knowledge base does not answer this question")
    assert out["citations"] == []


async def test_the_supported_answer_most_give_stands_over_the_judges_alone() -> None:
    # measured in the eval sitting: the judge's supported answer stood against samples that
    # agreed on another (self-consistency answered 25 of 25 paraphrases, the default 17); the
    # judge still answers from the KB as one call would, unshown the members' answers, and its
    # answer is one vote among the answers the KB supports
    judge = ScriptedBackend("judge", "ABS handles heat to around 95-100 °C [KB#mem_abs].")
    member = "PLA softens near 55-60 °C, so parts sag in hot cars [KB#mem_pla]."
    out = await ask(judge, member=member, k=2)
    prompt = judge.calls[0][-1]["content"]
    assert len(judge.calls) == 1 and "specialist-1" not in prompt
    # the judge's prompt opens as the members' do: rules, KB, then the question
    assert prompt.index("## Knowledge base") < prompt.index(f"Question: {QUESTION}")
    assert direct(out) == member
    check = out["claim_check"]
    assert check["selected"] == "specialist-1"
    assert list(check["agreement"].values()) == [["specialist-1", "specialist-2"], ["judge"]]


async def test_an_even_split_says_so_and_shows_both_sides_with_their_support() -> None:
    judge = ScriptedBackend("judge", "ABS handles heat to around 95-100 °C [KB#mem_abs].")
    member = "PLA softens near 55-60 °C, so parts sag in hot cars [KB#mem_pla]."
    out = await ask(judge, member=member, k=1)
    first, *sides = out["answer"].splitlines()
    assert first.startswith("The answers split evenly")
    assert sides == ["- ABS handles heat to around 95-100 °C [KB#mem_abs].", f"- {member}"]
    assert out["claim_check"]["selected"] == "split"
    assert {c["id"] for c in out["citations"]} == {"mem_abs", "mem_pla"}


async def test_a_fix_call_that_does_not_fit_leaves_the_draft_standing() -> None:
    # measured: the fix call quoted each failed claim's chunk whole, outside every section; a
    # chunk shown trimmed could not fit, BudgetError was raised, and with one judge the whole
    # run failed although a draft verdict existed
    huge = Chunk("mem_big", "ABS handles heat to around 95-100 °C. " * 600, "big.md", score=0.9,
                 heading="ABS > Heat")  # fmt: skip
    judge = ScriptedBackend("judge", "ABS handles heat to 400 °C [KB#mem_big].", n_ctx=4096)
    ctx = context(
        judge=judge,
        specialists=[ScriptedBackend("spec", "ABS [KB#mem_big].")],
        knowledge=ListStore([huge]),
        judge_tools=False,
    )
    out = await build_graph().ainvoke({"question": QUESTION}, context=ctx)
    assert "400" not in out["answer"]
    for budget in out["budgets"]:
        assert budget["prompt_tokens"] + budget["max_output_tokens"] <= budget["n_ctx"]


async def test_a_partial_member_cites_only_chunks_its_own_prompt_held() -> None:
    # split evidence: a member never sees the others' slices; out of time, its tag of a chunk
    # it was not shown must not reach the judge as a citation
    chunks = [
        Chunk(
            f"mem_{n}",
            f"Filament {n} handles heat to around {50 + n} °C. " * 8,
            f"{n}.md",
            score=1 - n / 100,
            heading=f"F{n} > Heat",
        )  # fmt: skip
        for n in range(12)
    ]

    class CitesOneItSawAndOneItDidNot(ScriptedBackend):
        async def stream(self, messages, **kwargs):  # type: ignore[override]
            seen = messages[-1]["content"]
            shown = [c.id for c in chunks if f"[KB#{c.id}]" in seen]
            unseen = next(c.id for c in chunks if c.id not in shown)
            yield ChatDelta(f"F1 [KB#{shown[0]}] and [KB#{unseen}] ")
            await asyncio.sleep(60)

    ctx = context(
        specialists=[CitesOneItSawAndOneItDidNot("spec")],
        knowledge=ListStore(chunks),
        evidence="split",
        specialist_timeout_s=1.0,
        judge_tools=False,
        k=2,
    )
    out = await build_graph().ainvoke({"question": "Which filament handles heat?"}, context=ctx)
    assert out["evidence"]["applied"] == "split"
    for proposal in out["proposals"]:
        seen = set(proposal["evidence"]["seen"])
        assert proposal.get("partial") and proposal["citations"]
        assert set(proposal["citations"]) <= seen and proposal["unknown_citations"]


def test_split_evidence_deals_every_chunk_to_someone_whatever_the_members_windows() -> None:
    counter = tiktoken_counter("cl100k_base")
    chunks = [
        Scored(f"c{n}", f"[KB#c{n}] chunk {n} " + "word " * 40, 1 - n / 100) for n in range(12)
    ]
    parts = [
        split(counter, chunks, limit, 2, index, "split")
        for index, limit in ((0, 900), (1, 300))  # members of different windows
    ]
    offered = {c.key for part in parts for c in part.offered}
    assert offered == {c.key for c in chunks}


async def test_empty_answers_do_not_count_toward_the_quorum() -> None:
    ctx = context(specialists=[ScriptedBackend("spec", "")], knowledge=KB, judge_tools=False)
    with pytest.raises(QuorumError) as raised:
        await build_graph().ainvoke({"question": QUESTION}, context=ctx)
    assert "wrote nothing" in str(raised.value)
