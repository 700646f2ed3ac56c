"""Faithful verdicts: each claim of the verdict is checked against its chunk before it stands.

The judge is scripted here: a model that misstates a chunk's numbers on demand cannot be had
for real. The council's own nodes, prompts and citation checks run as they do in a real run.
"""

from __future__ import annotations

from collective.graph import build_graph
from collective.kb.store import Chunk
from collective.models.base import ToolCall
from collective.verdict.support import check_claims, revise, shown_whole, support_share
from tests.fakes import ListStore, ScriptedBackend
from tests.unit.test_graph_council import context
from tests.verdicts import direct, quoted

PETG = Chunk(
    "mem_petg",
    "PETG prints at a nozzle temperature of 230-250 °C with the bed at 70-85 °C.",
    "filament/petg.md",
    score=0.9,
    heading="PETG > Print temperatures",
)
PP = Chunk(
    "mem_pp",
    "Polypropylene survives repeated folding as living hinges and floats.",
    "filament/polypropylene.md",
    score=0.8,
    heading="polypropylene > Mechanical behaviour",
)
SUPPLIED = {c.id: c for c in (PETG, PP)}


def test_claims_state_numbers_and_names_as_their_chunk_does() -> None:
    answer = (
        "PETG prints at 240-260 °C [KB#mem_petg]. Use PA6 nylon for the hinge [KB#mem_pp].\n"
        "- The bed of PETG sits at 70-85 °C. [KB#mem_petg]\n"
        "- Polypropylene floats kb#mem_pp\n"
        "Decision: polypropylene"
    )
    claims = check_claims(answer, shown_whole(SUPPLIED))
    # a word the chunk does not hold ("sits") is left to entailment: without it, kept out; the
    # decision is checked like any line, and tagged with the chunk that states it
    statuses = ["dropped", "dropped", "dropped", "supported", "retagged"]
    assert [c.status for c in claims] == statuses
    assert claims[0].missing == ("240-260 °C",)
    assert support_share(claims) == 1.0
    kept = revise(answer, claims)
    assert "240" not in kept and "PA6" not in kept
    assert "Decision: polypropylene [KB#mem_pp]" in kept


def test_a_claim_about_one_entity_citing_a_look_alike_entitys_chunk_is_not_supported() -> None:
    # measured in the eval: "PETG is 240-260 °C" citing PETG-CF's chunk (PETG's says 230-250)
    petg_cf = Chunk(
        "mem_cf",
        "PETG-CF prints at a nozzle temperature of 240-260 °C with the bed at 70-85 °C.",
        "filament/petg_cf.md",
        heading="PETG-CF > Print temperatures",
    )
    shown = shown_whole({"mem_cf": petg_cf})
    (claim,) = check_claims("PETG prints at 240-260 °C [KB#mem_cf].", shown)
    assert claim.status == "dropped" and "PETG" in claim.missing
    (claim,) = check_claims("PETG-CF prints at 240-260 °C [KB#mem_cf].", shown)
    assert claim.supported


def judge_says(*replies: str) -> ScriptedBackend:
    """A judge that gives `replies` in turn (the last one again after that)."""
    said: list[str] = []

    def reply(messages) -> str:
        said.append(messages[-1]["content"])
        return replies[min(len(said), len(replies)) - 1]

    backend = ScriptedBackend("judge", reply)
    backend.prompts = said  # type: ignore[attr-defined]
    return backend


async def test_the_judge_fixes_a_misstated_number_before_the_verdict_is_final() -> None:
    judge = judge_says(
        "PETG. It prints at 240-260 °C [KB#mem_petg].",
        "PETG. It prints at 230-250 °C [KB#mem_petg].",
    )
    ctx = context(judge=judge, knowledge=ListStore([PETG, PP]), judge_tools=False)
    out = await build_graph().ainvoke({"question": "What nozzle heat for PETG?"}, context=ctx)
    # every word of the fixed answer ("PETG [KB#mem_petg]. It prints at 230-250 °C") is the
    # chunk's sentence's, which is the verdict's lead in its place: said once
    assert direct(out) == f"{PETG.text} [KB#mem_petg]"
    quoted(out, [PETG, PP])
    assert out["answer"].count("230-250") == 1
    assert out["citation_support"] == 1.0
    assert out["claim_check"]["revised"] is True and out["claim_check"]["draft_support"] == 0.5
    check = judge.prompts[1]  # type: ignore[attr-defined]
    assert "240-260 °C" in check and "its chunk says" in check and "230-250 °C" in check
    assert [b["node"] for b in out["budgets"]][-2:] == ["judge", "judge"]


async def test_a_fix_that_echoes_the_check_is_not_used() -> None:
    # measured in the eval: the 1.5B judge answered with the check's own lines
    judge = judge_says(
        "PETG. It prints at 240-260 °C [KB#mem_petg].\n- It bonds well [KB#mem_petg]",
        "- The claim states 240, 260; its chunk says: [KB#mem_petg] ...",
    )
    ctx = context(judge=judge, knowledge=ListStore([PETG, PP]), judge_tools=False)
    out = await build_graph().ainvoke({"question": "What nozzle heat for PETG?"}, context=ctx)
    assert direct(out) == "PETG [KB#mem_petg]."  # the draft, its unsupported claim dropped
    assert out["claim_check"]["revised"] is False
    assert any("was not used" in note for note in out["notes"])


async def test_a_claim_its_chunk_does_not_support_is_dropped_when_the_fix_fails() -> None:
    wrong = "\n".join(
        [
            "Polypropylene [KB#mem_pp].",
            "- It folds as a hinge [KB#mem_pp]",
            "- PA6 floats [KB#mem_pp]",
        ]
    )
    ctx = context(judge=judge_says(wrong), knowledge=ListStore([PETG, PP]), judge_tools=False)
    out = await build_graph().ainvoke({"question": "Which plastic floats?"}, context=ctx)
    assert "PA6" not in out["answer"] and "folding as living hinges" in out["answer"]
    assert out["citation_support"] == 1.0
    assert out["claim_check"]["draft_support"] == 2 / 3
    assert any("dropped 1 claim" in note for note in out["notes"])
    # the dropped line is reported; the direct answer's claim, then the chunk's own sentence
    assert [c["status"] for c in out["claims"]] == ["dropped", "supported", "supported"]
    assert quoted(out, [PETG, PP])


async def test_a_bare_tag_naming_a_supplied_chunk_counts_as_its_citation() -> None:
    judge = judge_says("Polypropylene floats, kb#mem_pp. See also KB#mem_gone.")
    ctx = context(judge=judge, knowledge=ListStore([PETG, PP]), judge_tools=False)
    out = await build_graph().ainvoke({"question": "Which plastic floats?"}, context=ctx)
    assert out["citations"] == [{"id": "mem_pp", "source": "filament/polypropylene.md"}]
    assert out["unknown_citations"] == ["KB#mem_gone."]


async def test_the_fix_call_reads_on_from_the_drafts_own_prompt() -> None:
    # Measured on the demo: the fix call was composed afresh without the draft's tools, so the
    # in-process judge reused 133 of its 6,013 prompt tokens; it now continues the draft's
    # conversation (same messages and tools), and a prompt cache reuses all of it.
    replies = [
        [ToolCall("c1", "kb_search", {"query": "PETG nozzle"})],
        "PETG. It prints at 240-260 °C [KB#mem_petg].",
        "PETG. It prints at 230-250 °C [KB#mem_petg].",
    ]
    judge = ScriptedBackend("judge", lambda m: replies[min(len(judge.calls), 3) - 1],
                            supports_tools=True)  # fmt: skip
    ctx = context(judge=judge, knowledge=ListStore([PETG, PP]), judge_tools=True)
    out = await build_graph().ainvoke({"question": "What nozzle heat for PETG?"}, context=ctx)
    assert direct(out) == f"{PETG.text} [KB#mem_petg]"  # the fixed answer, said by its chunk
    draft, fix = judge.calls[-2], judge.calls[-1]
    assert fix[: len(draft)] == draft
    assert fix[len(draft)] == {"role": "assistant", "content": replies[1]}
    assert "240-260 °C" in fix[-1]["content"] and "its chunk says" in fix[-1]["content"]
    assert judge.kwargs[-1]["tools"] == judge.kwargs[-2]["tools"] is not None
    assert judge.kwargs[-1]["tool_choice"] == "none"


METALS = [
    Chunk(f"mem_{key}", text, f"metal/{key}.md", score=0.9 - n / 10, heading=f"{name} > Density")
    for n, (key, name, text) in enumerate(
        [
            ("al", "6061-T6 aluminium", "6061-T6 aluminium has a density of about 2.70 g/cm3."),
            ("ss", "316 stainless steel", "316 stainless steel has a density of about 8.00 g/cm3."),
            ("cu", "C110 copper", "C110 copper has a density of about 8.96 g/cm3."),
        ]
    )
]


async def test_a_which_is_highest_verdict_leads_with_the_highest_figure_its_claims_state() -> None:
    # Measured in the eval: asked which metal is densest, the 1.5B judge copied three densities
    # and named none; a sample named aluminium, the lightest, "the highest".
    judge = judge_says(
        "6061-T6 aluminium has a density of about 2.70 g/cm3 [KB#mem_al].\n"
        "- 316 stainless steel has a density of about 8.00 g/cm3 [KB#mem_ss]."
    )
    member = ScriptedBackend(
        "spec", "C110 copper has a density of about 8.96 g/cm3 [KB#mem_cu]. Aluminium is densest."
    )
    ctx = context(judge=judge, specialists=[member], knowledge=ListStore(METALS),
                  judge_tools=False)  # fmt: skip
    question = "Which of these metals has the highest density: 6061-T6, 316 or C110 copper?"
    out = await build_graph().ainvoke({"question": question}, context=ctx)
    # ranked from the KB's own figures of the property asked, in the chunks' words
    assert out["answer"].splitlines() == [
        "Highest density of 3 compared: C110 copper has a density of about 8.96 g/cm3 [KB#mem_cu]",
        "- 316 stainless steel has a density of about 8.00 g/cm3 [KB#mem_ss]",
        "- 6061-T6 aluminium has a density of about 2.70 g/cm3 [KB#mem_al]",
    ]
    assert "Aluminium is densest" not in out["answer"]
    assert {c["id"] for c in out["citations"]} == {"mem_al", "mem_ss", "mem_cu"}
    assert out["claim_check"]["extreme"]["compared"] == 3
    # a question that asks for no extreme keeps the judge's verdict as it is
    out = await build_graph().ainvoke({"question": "What is 316's density?"}, context=ctx)
    assert not out["answer"].startswith("Highest")


async def test_a_line_on_a_thing_the_question_does_not_name_is_left_out() -> None:
    # Read in the eval: asked "white ash or teak?", the verdict gave teak's and white oak's
    # hardness; asked about seven woods, it added black walnut's.
    judge = judge_says(
        "316 stainless steel has a density of about 8.00 g/cm3 [KB#mem_ss].\n"
        "- 6061-T6 aluminium has a density of about 2.70 g/cm3 [KB#mem_al]."
    )
    member = ScriptedBackend("spec", "C110 copper has a density of about 8.96 g/cm3 [KB#mem_cu].")
    ctx = context(judge=judge, specialists=[member], knowledge=ListStore(METALS),
                  judge_tools=False)  # fmt: skip
    question = "Which is denser, 316 stainless steel or C110 copper?"
    out = await build_graph().ainvoke({"question": question}, context=ctx)
    assert out["answer"].splitlines() == [
        "Highest density of 2 compared: C110 copper has a density of about 8.96 g/cm3 [KB#mem_cu]",
        "- 316 stainless steel has a density of about 8.00 g/cm3 [KB#mem_ss]",
    ]
    assert "mem_al" not in {c["id"] for c in out["citations"]}
    assert not [c for c in out["claims"] if "6061-T6" in c["text"]]
    # a question that names no two of the things keeps every line
    out = await build_graph().ainvoke({"question": "How dense are these metals?"}, context=ctx)
    assert "6061-T6 aluminium" in out["answer"]
