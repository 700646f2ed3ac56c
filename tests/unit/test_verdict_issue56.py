"""The examples of the issue on verdicts, each through the code that failed on it.

The chunks are the bundled eval KB's (`tests/data/eval_kb`), as `kb add` splits them; the judge
and members are scripted with what the issue read them write (a model that writes a given
wrong answer on demand cannot be had for real); the council's nodes and checks run as in a run.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from collective.budget.plans import ModelBudget
from collective.graph import build_graph
from collective.kb.names import chunk_vocabulary
from collective.kb.store import Chunk
from collective.memory.conversation import remember_turn
from collective.verdict.support import check_claims, shown_whole
from tests.fakes import ListStore, ScriptedBackend
from tests.unit.test_graph_council import context
from tests.unit.test_verdict_comparison import eval_chunks
from tests.verdicts import direct, quoted


def chunk(title: str, section: str, score: float = 0.5) -> Chunk:
    """The eval KB's chunk of `title` whose section starts with `section`, scored."""
    (found,) = [
        c
        for c in eval_chunks()
        if c.heading.lower().startswith(f"{title.lower()} > {section.lower()}")
    ]
    return dataclasses.replace(found, score=score)


def cite(c: Chunk) -> str:
    return f"[KB#{c.id}]"


async def council(question: str, judge: str, members: list[str], chunks: list[Chunk]) -> dict:
    ctx = context(
        judge=ScriptedBackend("judge", judge),
        specialists=[ScriptedBackend(f"spec{n}", m) for n, m in enumerate(members)],
        k=len(members),
        knowledge=ListStore(chunks),
        judge_tools=False,
        planner=None,
    )
    return await build_graph().ainvoke({"question": question}, context=ctx)


# -- answers that do not answer -----------------------------------------------------------


async def test_a_supported_answer_to_another_question_never_wins() -> None:
    # eval sitting: "At roughly what temperature does C360 brass turn liquid?" got hot melt
    # glue's temperature range and brass's welding line; the samples had the melting range
    melt = chunk("C360 brass", "Density", 0.9)
    weld = chunk("C360 brass", "Welding", 0.6)
    glue = chunk("hot melt glue", "Temperature", 0.5)
    judge = (
        f"Temperature range of hot melt glue: softens again around 60-80 °C {cite(glue)}.\n"
        f"- Welding C360 brass: poorly suited to welding {cite(weld)}"
    )
    sample = f"C360 brass melts over 885-900 °C {cite(melt)}."
    question = "At roughly what temperature does C360 brass turn liquid?"
    out = await council(question, judge, [sample, sample], [melt, weld, glue])
    assert direct(out) == f"{melt.text} {cite(melt)}"  # the sample's answer, said by its chunk
    assert out["answer"].count("885-900") == 1
    assert "hot melt glue" not in out["answer"].lower()
    assert out["claim_check"]["selected"] == "specialist-1"
    assert any("judge: it answers about another thing" in n for n in out["notes"])


async def test_with_no_answer_giving_the_figure_asked_the_chunks_figure_is_quoted() -> None:
    # the same question, every answer off it: the chunk shown that states it answers
    melt = chunk("C360 brass", "Density", 0.9)
    glue = chunk("hot melt glue", "Temperature", 0.5)
    judge = f"Temperature range of hot melt glue: softens again around 60-80 °C {cite(glue)}."
    question = "What is the melting range of C360 brass?"
    out = await council(question, judge, [judge], [melt, glue])
    assert out["answer"] == f"{melt.text} {cite(melt)}"
    # "turn liquid" names no property: the chunk of the thing asked that retrieval ranks first
    # by a wide margin answers in its own words; where retrieval is unsure, the verdict says so
    question = "At roughly what temperature does C360 brass turn liquid?"
    out = await council(question, judge, [judge], [melt, glue])
    assert out["answer"] == f"{melt.text} {cite(melt)}"
    close = chunk("hot melt glue", "Temperature", 0.85)
    out = await council(question, judge, [judge], [melt, close])
    assert out["answer"].startswith("The knowledge base does not answer this question")
    assert "60-80" not in out["answer"]


# -- a fabricated answer marked as supported ----------------------------------------------


async def test_a_wood_the_kb_does_not_hold_is_never_the_subject_of_another_woods_sentence() -> None:
    ash = chunk("white ash", "Density", 0.8)
    fabricated = (
        f"Hickory has a density of about 0.67 g/cm3; Janka hardness about 1320 lbf {cite(ash)}."
    )
    (claim,) = check_claims(fabricated, shown_whole({ash.id: ash}))
    assert claim.status == "dropped" and "Hickory" in claim.reason
    out = await council("What is the Janka hardness of hickory?", fabricated, [fabricated], [ash])
    assert out["answer"].startswith("The knowledge base does not answer this question")
    assert "0.67" not in out["answer"] and "1320" not in out["answer"]


async def test_a_metal_the_kb_does_not_hold_gets_no_figure_from_another() -> None:
    # the verdict gave 5052-H32's melting range and "This information is directly stated"
    al = chunk("5052-H32 aluminium", "Density", 0.7)
    said = (
        f"5052-H32 aluminium melts over 607-650 °C {cite(al)}.\n"
        "This information is directly stated in the knowledge base."
    )
    out = await council("What is the melting point of Inconel 718?", said, [said], [al])
    assert out["answer"].startswith("The knowledge base does not answer this question")
    assert "Inconel" in out["answer"] and "607" not in out["answer"]
    assert out["citations"] == []


# -- faithful lines that answer something else -----------------------------------------------


async def test_the_chunk_ranked_first_by_a_wide_margin_is_not_passed_over() -> None:
    # asked which alloy cannot be fusion-welded, the verdict gave another alloy's "welds
    # easily" line though recall ranked 7075-T6's welding chunk first, 0.88 against 0.57
    top = chunk("7075-T6 aluminium", "Welding", 0.88)
    other = chunk("5052-H32 aluminium", "Welding", 0.57)
    judge = f"5052-H32 aluminium welds easily and bends tightly without cracking {cite(other)}."
    out = await council("Which aluminium alloy cannot be fusion welded?", judge, [judge],
                        [top, other])  # fmt: skip
    lines = quoted(out, [top, other])
    assert lines and cite(top) in lines[0] and "unweldable by fusion" in lines[0]


async def test_drying_asked_the_drying_chunk_is_quoted_not_the_heat_deflection() -> None:
    dry = chunk("ABS", "Drying", 0.87)
    heat = chunk("ABS", "Heat", 0.35)
    judge = f"ABS: heat deflection about 95-100 °C {cite(heat)}."
    out = await council("How long should I dry ABS filament?", judge, [judge], [dry, heat])
    assert cite(dry) in out["answer"] and "4 hours" in out["answer"]


async def test_no_heading_path_and_no_neutralised_tag_in_the_verdict() -> None:
    # "white oak > Typical uses: ..." copied from the prompt; "[KB-ref mem_...]" from memory
    uses = chunk("white oak", "Typical", 0.8)
    judge = (
        f"white oak > Typical uses: White oak is used for furniture, flooring, barrels and boat "
        f"building {cite(uses)}. ASA: UV stable [KB-ref mem_7671abc]"
    )
    out = await council("What is white oak used for?", judge, [judge], [uses])
    assert " > " not in out["answer"] and "KB-ref" not in out["answer"]
    assert direct(out).startswith("White oak is used for furniture")


# -- comparison leads that invent the answer (through the judge node) ------------------------


async def test_cheapest_has_no_ranked_lead_and_lightest_ranks_densities() -> None:
    metals = [chunk(t, "Cost", 0.6) for t in ("1018 mild steel", "6061-T6 aluminium")]
    dens = [chunk(t, "Density", 0.7) for t in ("1018 mild steel", "6061-T6 aluminium")]
    judge = f"1018 mild steel is cheap and widely available {cite(metals[0])}."
    question = "Which metal is the cheapest: 1018 mild steel or 6061-T6 aluminium?"
    out = await council(question, judge, [judge], [*metals, *dens])
    assert "extreme" not in out["claim_check"] and direct(out) == judge
    question = "Which is the lightest: 1018 mild steel or 6061-T6 aluminium?"
    out = await council(question, judge, [judge], [*metals, *dens])
    assert out["answer"].startswith("Lowest density of 2 compared: 6061-T6 aluminium has a density")


@pytest.mark.parametrize(
    ("metal", "other", "judge_says", "selected"),
    [
        # eval sitting 2026-11-28: "At roughly what temperature does 5052-H32 aluminium turn
        # liquid?" got "the knowledge base does not answer" from the default: every answer
        # said "turns liquid at 607-650 °C", the chunk says "melts over 607-650 °C"
        ("5052-H32 aluminium", "Welding", "the melting range", "judge"),
        # and 304 stainless steel: the judge quoted its tensile line, the samples its melting
        # range in their own words
        ("304 stainless steel", "Strength", "the other line", "specialist-1"),
    ],
)
async def test_a_melting_range_in_the_model_s_words_is_answered_in_the_chunk_s(
    metal: str, other: str, judge_says: str, selected: str
) -> None:
    melt, line = chunk(metal, "Density", 0.8), chunk(metal, other, 0.6)
    low, high = re.search(r"melts over (\d+)-(\d+)", melt.text).groups()
    sample = f"At roughly {low}-{high} °C, {metal} turns liquid."
    judge = (f"{metal} turns liquid at roughly {low}-{high} °C {cite(melt)}."
             if judge_says == "the melting range" else f"{line.text} {cite(line)}")  # fmt: skip
    question = f"At roughly what temperature does {metal} turn liquid?"
    out = await council(question, judge, [sample, sample], [melt, line])
    assert direct(out) == f"{melt.text} {cite(melt)}"
    assert "turns liquid" not in out["answer"]
    assert out["claim_check"]["selected"] == selected


@pytest.mark.parametrize(
    ("thing", "sample"),
    [
        # eval sitting at f5fc0af: all eight "How warm should the build plate be when printing
        # X?" failed in the default, right in self-consistency: "the build plate should be
        # heated to 70-90 °C when printing X" ties "printing" to the bed's figure, the chunk
        # "prints" to the nozzle's, so no sentence "states" it, though the chunk holds it
        *((thing, "The build plate should be heated to {low}-{high} °C when printing {thing}.")
          for thing in ("PA12 nylon", "PEEK", "polypropylene", "TPU 95A")),
        # build-plate re-run after that fix: ABS, TPU 95A, PA6 nylon, PEEK and PETG-CF still
        # missed, the samples giving the figure with no subject, cited
        ("ABS", "The build plate should be at least {low}-{high} °C {cite}."),
        ("TPU 95A", "Keep the build plate around {low}-{high} °C {cite}."),
        ("PA6 nylon", "Set the plate to {low}-{high} °C {cite}."),
        ("PEEK", "A build plate of {low}-{high} °C is needed {cite}."),
        ("PETG-CF", "The build plate: {low}-{high} °C {cite}."),
    ],
)  # fmt: skip
async def test_a_bed_figure_in_the_model_s_words_is_answered_in_the_chunk_s(thing, sample):
    printing, other = chunk(thing, "Print", 0.8), chunk(thing, "Heat", 0.6)
    low, high = re.search(r"bed at (\d+)-(\d+)", printing.text).groups()
    judge = f"{other.text} {cite(other)}"
    sample = sample.format(low=low, high=high, thing=thing, cite=cite(printing))
    question = f"How warm should the build plate be when printing {thing}?"
    out = await council(question, judge, [sample, sample], [printing, other])
    assert direct(out) == f"{printing.text} {cite(printing)}"
    assert "plate" not in out["answer"]


@pytest.mark.parametrize(
    ("question", "sample"),
    [
        # a subjectless figure of another thing's chunk never answers for the thing asked
        ("How warm should the build plate be when printing ABS?",
         "The build plate should be at least 40-60 °C {tpu}."),
        # nor a thing the KB does not hold
        ("How warm should the build plate be when printing PEKK?",
         "The build plate should be at least 95-110 °C {abs}."),
    ],
)  # fmt: skip
async def test_a_subjectless_figure_stands_only_for_the_chunk_s_own_thing(question, sample):
    abs_, tpu = chunk("ABS", "Print", 0.8), chunk("TPU 95A", "Print", 0.7)
    sample = sample.format(tpu=cite(tpu), abs=cite(abs_))
    out = await council(question, sample, [sample, sample], [abs_, tpu])
    assert "40-60" not in direct(out) and "plate" not in out["answer"]
    if "PEKK" in question:
        assert out["answer"].startswith("The knowledge base does not answer this question")


class WholeKb(ListStore):
    """A KB that knows its names and figures (as the SQLite store does) and holds more chunks
    than its search brings: `search` returns the `retrieved` ones only."""

    def __init__(self, retrieved: list[Chunk]) -> None:
        super().__init__(retrieved)
        self.whole = {c.id: c for c in eval_chunks()}

    def get(self, chunk_id: str) -> Chunk | None:
        return self.whole.get(chunk_id)

    def vocabulary(self):
        return chunk_vocabulary(list(self.whole.values()))


async def test_a_ranking_reads_the_figures_retrieval_did_not_bring_from_the_kb() -> None:
    # eval sitting, "which of these nine metals has the highest density": retrieval brought
    # six density chunks, not C110 copper's; 304 and 316 tied at 8.00 on top, so no ranked lead,
    # and the judge's "7075-T6 aluminium" (the lightest) stood
    steels = [chunk(t, "Density", 0.7) for t in ("304 stainless steel", "316 stainless steel")]
    judge = f"316 stainless steel has a density of about 8.00 g/cm3 {cite(steels[1])}."
    question = (
        "Which of these metals has the highest density: 304 stainless steel, "
        "316 stainless steel or C110 copper?"
    )
    ctx = context(judge=ScriptedBackend("judge", judge),
                  specialists=[ScriptedBackend("spec0", judge)], k=1,
                  knowledge=WholeKb(steels), judge_tools=False, planner=None)  # fmt: skip
    out = await build_graph().ainvoke({"question": question}, context=ctx)
    copper = chunk("C110 copper", "Density")
    assert out["answer"].startswith(
        f"Highest density of 3 compared: C110 copper has a density of about 8.96 g/cm3 "
        f"and melts over 1083 °C {cite(copper)}"
    )
    assert copper.id in {c["id"] for c in out["citations"]}
    assert any("read from the KB" in n for n in out["notes"])


async def test_a_ranking_reads_the_figures_no_prompt_showed_from_the_kb() -> None:
    # the same question in the sitting after that fix: C110's chunk was retrieved, but the
    # prompts' small KB sections showed the six with higher scores, not it
    steels = [chunk(t, "Density", 0.7) for t in ("304 stainless steel", "316 stainless steel")]
    copper = chunk("C110 copper", "Density", 0.2)
    judge = f"316 stainless steel has a density of about 8.00 g/cm3 {cite(steels[1])}."
    small = {"system": 120, "kb_chunks": 110, "task": 105, "safety_margin": 0}
    plans = {"specialist": small, "judge": {**small, "proposals": 20}}
    budgets = {r: ModelBudget(r, 8192, sum(p.values()), 256, p) for r, p in plans.items()}
    ctx = context(judge=ScriptedBackend("judge", judge), budgets=budgets,
                  specialists=[ScriptedBackend("spec0", judge)], k=1, planner=None,
                  knowledge=WholeKb([*steels, copper]), judge_tools=False)  # fmt: skip
    question = (
        "Which of these metals has the highest density: 304 stainless steel, "
        "316 stainless steel or C110 copper?"
    )
    out = await build_graph().ainvoke({"question": question}, context=ctx)
    prompts = "\n".join(m["content"] for b in (ctx.judge, *ctx.specialists) for m in b.calls[0])
    unseen = [c for c in (*steels, copper) if c.id not in prompts]
    assert copper in unseen  # retrieved, but no prompt had room for it
    assert out["answer"].startswith("Highest density of 3 compared: C110 copper")
    assert f"{len(unseen)} of its figures read from the KB" in " ".join(out["notes"])


# -- false claims kept as supported, true ones dropped -------------------------------------


@pytest.mark.parametrize(
    ("claim", "title", "section"),
    [
        ("7075-T6 is easily weldable by fusion", "7075-T6 aluminium", "Welding"),
        ("Red oak is rot resistant", "red oak", "Outdoor"),
        ("Outdoor durability of balsa: durable", "balsa", "Outdoor"),
        ("ASA warps more than ABS", "ASA", "Warping"),
        ("PTFE has the highest friction", "PTFE", "Friction"),
        ("PETG prints at 230-250 °C, hotter than ABS", "PETG", "Print"),
        ("PVA glue bonds wood, paper and metal", "PVA wood glue", "What it bonds"),
        ("PTFE is rated for continuous service up to 400C", "PTFE", "Service"),
        ("PEEK rod is rated for continuous service up to 330C", "PEEK rod", "Service"),
        ("PLA prints at 30 °C", "PLA", "Print"),
        ("Dry PLA for 2 hours", "PLA", "Drying"),
        ("Decision: PLA, it holds up at 100 °C", "PLA", "Heat"),
    ],
)
def test_the_issues_false_claims_are_dropped(claim: str, title: str, section: str) -> None:
    cited = chunk(title, section)
    shown = shown_whole({c.id: c for c in eval_chunks() if c.heading.startswith(f"{title} >")})
    claims = check_claims(f"{claim} {cite(cited)}.", shown, vocabulary=VOCABULARY)
    assert [c.status for c in claims] == ["dropped"], claims


@pytest.mark.parametrize(
    ("claim", "title", "section"),
    [
        ("PTFE is rated for continuous service up to 260 C", "PTFE", "Service"),
        ("PTFE has a density of about 2.2 g/cm3", "PTFE", "Density"),
        ("6061-T6 has a density of about 2.70 g/cm3", "6061-T6 aluminium", "Density"),
        ("Copper has a density of about 8.96 g/cm3", "C110 copper", "Density"),
        ("316 has a density of about 8.00 g/cm3", "316 stainless steel", "Density"),
        ("Cyanoacrylate fails above about 80 °C", "cyanoacrylate (super glue)", "Temperature"),
    ],
)
def test_the_issues_true_claims_stand(claim: str, title: str, section: str) -> None:
    cited = chunk(title, section)
    shown = shown_whole({c.id: c for c in eval_chunks() if c.heading.startswith(f"{title} >")})
    (checked,) = check_claims(f"{claim} {cite(cited)}.", shown, vocabulary=VOCABULARY)
    assert checked.status == "supported", checked.reason


def test_a_sentence_whose_clauses_cite_two_chunks_is_checked_clause_by_clause() -> None:
    service, tensile = chunk("PTFE", "Service"), chunk("PTFE", "Tensile")
    shown = shown_whole({service.id: service, tensile.id: tensile})
    answer = (
        f"PTFE is rated for continuous service up to 260 °C {cite(service)}, and its tensile "
        f"strength is about 24 MPa {cite(tensile)}."
    )
    claims = check_claims(answer, shown, vocabulary=VOCABULARY)
    assert [(c.status, c.cited) for c in claims] == [
        ("supported", (service.id,)),
        ("supported", (tensile.id,)),
    ]


VOCABULARY = chunk_vocabulary(eval_chunks())


@pytest.fixture(scope="module")
def store_vocabulary(tmp_path_factory):
    """The SQLite KB of a copy of the eval KB whose files give trade names in front matter."""
    import shutil

    from collective.kb.sqlite_store import SqliteKnowledgeStore
    from collective.verdict.shown import ShownVocabulary
    from tests.unit.test_verdict_comparison import EVAL_KB

    root = tmp_path_factory.mktemp("names")
    shutil.copytree(EVAL_KB, root / "eval_kb")
    for name, names in {"plastic/ptfe.md": "Teflon", "plastic/acetal.md": "POM"}.items():
        file = root / "eval_kb" / name
        file.write_text(f"---\nnames: {names}\n---\n{file.read_text()}")
    store = SqliteKnowledgeStore(root / "kb.sqlite", embedder=None)
    store.add_paths([root / "eval_kb"], base=root, embed=False)
    return ShownVocabulary(store.vocabulary(), [c.id for c in eval_chunks()])


@pytest.mark.parametrize(
    ("claim", "title", "section", "status"),
    [
        ("Teflon is rated for continuous service up to 260 °C", "PTFE", "Service", "supported"),
        ("POM is rated for continuous service up to 105 °C", "acetal", "Service", "supported"),
        ("Teflon is rated for continuous service up to 105 °C", "acetal", "Service", "dropped"),
    ],
)
def test_a_name_a_user_gave_the_kb_is_read_by_the_claim_check(
    store_vocabulary, claim: str, title: str, section: str, status: str
) -> None:
    cited = chunk(title, section)
    shown = shown_whole({cited.id: cited})
    (checked,) = check_claims(f"{claim} {cite(cited)}.", shown, vocabulary=store_vocabulary)
    assert checked.status == status, checked.reason


async def test_an_unchecked_decision_is_never_pinned_into_memory() -> None:
    # a `Decision:` line was never checked and went into L1 memory as it stood
    heat = chunk("PLA", "Heat", 0.8)
    judge = (
        f"PLA softens near its glass transition of about 60 °C {cite(heat)}.\n"
        f"Decision: PLA, it holds up at 100 °C in a hot car {cite(heat)}"
    )
    out = await council("Will a PLA part hold up in a hot car?", judge, [judge], [heat])
    assert "Decision" not in out["answer"] and "100 °C" not in out["answer"]
    dropped = [c for c in out["claims"] if c["text"].startswith("Decision")]
    assert [c["status"] for c in dropped] == ["dropped"]
    memory = remember_turn(None, None, run_id="r1", question="PLA?", answer=out["answer"])
    assert memory.decisions == []


async def test_an_answer_whose_first_line_no_chunk_supports_does_not_vote() -> None:
    # read in `collective ask` on the demo KB: two samples answered "PLA should be used for a
    # part that sits in a hot car." over a supported line that PLA parts sag in hot cars, and
    # outvoted the judge; their answer is no answer the KB supports
    pla, asa = chunk("PLA", "Heat", 0.8), chunk("ASA", "Heat", 0.7)
    judge = f"ASA: heat deflection about 95 °C {cite(asa)}."
    sample = (
        "PLA should be used for a part that sits in a hot car.\n"
        f"- PLA softens near its glass transition of about 60 °C, so parts sag in hot cars "
        f"{cite(pla)}."
    )
    # and, read in the run after: the same, its reason on the same line as a sentence after it
    inline = (
        "PLA should be used for a part that sits in a hot car because it softens near 60 °C. "
        f"PLA softens near its glass transition of about 60 °C, so parts sag in hot cars "
        f"{cite(pla)}."
    )
    for said in (sample, inline):
        out = await council("Which filament for a part in a hot car?", judge, [said, said],
                            [pla, asa])  # fmt: skip
        assert direct(out) == judge and out["claim_check"]["selected"] == "judge"
        assert any("no claim of its direct answer is supported" in n for n in out["notes"])


async def test_a_line_on_a_hot_enclosure_is_not_quoted_for_a_hot_car() -> None:
    # make demo's verdict carried "PLA ... prone to heat creep in hot metal hotends", not about
    # a hot car, and left out the chunk retrieval ranked first (scores as `collective ask` read
    # them on the demo KB)
    car = Chunk(
        "mem_car",
        "A car interior in summer sun commonly reaches 60-80 °C and dashboard surfaces can exceed "
        "90 °C. ASA or ABS (about 95-100 °C) are the usual choices, with ASA preferred where the "
        "part sees sunlight through glass.",
        "demo/applications.md",
        score=0.70,
        heading="Choosing a material > Parts in a hot car",
    )
    creep = Chunk(
        "mem_creep",
        "Because PLA softens at low temperature, it is prone to heat creep in all-metal "
        "hotends inside a hot enclosure: filament softens above the melt zone and jams.",
        "demo/pla_printing.md",
        score=0.41,
        heading="PLA printing > Heat creep",
    )
    pla, asa = chunk("PLA", "Heat", 0.36), chunk("ASA", "Heat", 0.31)
    judge = f"ASA: heat deflection about 95 °C {cite(asa)}."
    out = await council("Which filament for a part in a hot car?", judge, [judge],
                        [car, creep, pla, asa])  # fmt: skip
    lines = quoted(out, [car, creep, pla, asa])
    assert lines and cite(car) in lines[0]
    assert "heat creep" not in out["answer"]


def test_the_chunks_as_shown_are_handed_over_by_the_fit_not_read_back_from_the_prompt() -> None:
    from collective.budget.counting import tiktoken_counter
    from collective.budget.trimming import select_chunks
    from collective.nodes.chunks import scored_chunks
    from collective.verdict.support import as_shown

    counter = tiktoken_counter("cl100k_base")
    long = dataclasses.replace(chunk("PLA", "Print", 0.9), text="PLA prints at 190-220 °C. " * 80)
    other = chunk("ABS", "Print", 0.5)
    fitted = select_chunks(counter, scored_chunks([long, other]), 120)
    assert fitted.kept == (long.id,) and fitted.trimmed
    ((key, text),) = fitted.shown
    shown = as_shown(long, text)
    assert key == long.id and shown.text.startswith("PLA prints at 190-220 °C.")
    assert "trimmed" not in shown.text and len(shown.text) < len(long.text)
    whole = select_chunks(counter, scored_chunks([other]), 500)
    assert as_shown(other, dict(whole.shown)[other.id]).text == other.text


async def test_a_property_the_kb_does_not_state_of_a_thing_it_holds_is_said_so() -> None:
    # held out: "What is the thermal conductivity of C110 copper?" got C110's uses and tensile
    # strength, both supported, neither about conductivity
    uses = chunk("C110 copper", "Typical uses", 0.7)
    strength = chunk("C110 copper", "Strength", 0.6)
    welding = chunk("C110 copper", "Welding", 0.5)
    judge = f"{uses.text} {cite(uses)}\n- {strength.text} {cite(strength)}"
    question = "What is the thermal conductivity of C110 copper?"
    out = await council(question, judge, [judge], [uses, strength, welding])
    lead, *rest = out["answer"].splitlines()
    assert lead == (
        "The knowledge base does not answer this question: it does not state the thermal "
        "conductivity of C110 copper."
    )
    assert rest == [f"- {welding.text} {cite(welding)}"]  # what it says of conducting heat
    assert "220 MPa" not in out["answer"] and "bus bars" not in out["answer"]
    # asked what the KB states in words, the verdict that states it stands as it is
    question = "What are the typical uses of C110 copper?"
    out = await council(question, judge, [judge], [uses, strength, welding])
    assert out["answer"].startswith(uses.text)


@pytest.mark.parametrize(
    ("question", "judge_about", "described", "section", "figure"),
    [
        # held out: answered with hard maple's density, white ash's use line below it
        ("How dense is the wood used for baseball bats?", ("hard maple", "Density"),
         "white ash", "Density", "0.67 g/cm3"),
        # held out: ABS's bed for "the filament used for dissolvable ABS supports"
        ("What bed temperature does the filament used for dissolvable ABS supports need?",
         ("ABS", "Print temperatures"), "HIPS", "Print temperatures", "90-110 °C"),
    ],
)  # fmt: skip
async def test_a_thing_described_by_its_use_gets_its_own_figure(
    question, judge_about, described, section, figure
) -> None:
    neighbour = chunk(*judge_about, 0.8)
    uses = chunk(described, "Typical uses", 0.7)
    judge = f"{neighbour.text} {cite(neighbour)}\n- {uses.text} {cite(uses)}"
    ctx = context(judge=ScriptedBackend("judge", judge), k=1, planner=None,
                  specialists=[ScriptedBackend("spec0", judge)],
                  knowledge=WholeKb([neighbour, uses]), judge_tools=False)  # fmt: skip
    out = await build_graph().ainvoke({"question": question}, context=ctx)
    held = chunk(described, section)  # retrieval did not bring it: read from the KB
    lead, *rest = out["answer"].splitlines()
    assert lead.startswith(held.text.rstrip(".")) and figure in lead and cite(held) in lead
    assert any(cite(uses) in line for line in rest)
    assert neighbour.text not in out["answer"], out["answer"]


async def test_a_line_on_the_property_asked_is_quoted_over_figures_of_others() -> None:
    # held out, "Do I really have to dry polypropylene filament before printing?", asked by
    # the property's name: its print temperatures and density were the verdict; the drying
    # chunk ("rarely needed") was retrieved
    temps = chunk("polypropylene", "Print temperatures", 0.62)
    dry = chunk("polypropylene", "Drying", 0.58)
    notes = chunk("polypropylene", "Notes", 0.5)
    judge = f"{temps.text} {cite(temps)}\n- {notes.text} {cite(notes)}"

    async def ask(question: str, judge: str, retrieved: list) -> dict:
        ctx = context(judge=ScriptedBackend("judge", judge), k=1, planner=None,
                      specialists=[ScriptedBackend("spec0", judge)],
                      knowledge=WholeKb(retrieved), judge_tools=False)  # fmt: skip
        return await build_graph().ainvoke({"question": question}, context=ctx)

    question = "What drying temperature does polypropylene filament need before printing?"
    out = await ask(question, judge, [temps, dry, notes])
    assert out["answer"] == f"{dry.text} {cite(dry)}"
    # the KB has no drying line of it at all: it says so, and states no other figure
    out = await ask(question, judge, [temps, notes])
    assert out["answer"] == (
        "The knowledge base does not answer this question: it does not state the drying "
        "temperature of polypropylene."
    )
    # a property read off a word of its name only ("print speed" off "print") is no property
    # the verdict must speak of: the density answers whether it floats (scored as retrieval
    # scores them: `collective recall` on the eval KB, 0.915 and 0.73)
    notes, temps = dataclasses.replace(notes, score=0.9), dataclasses.replace(temps, score=0.73)
    out = await ask("Will a polypropylene print float in water?", f"{notes.text} {cite(notes)}",
                    [notes, temps])  # fmt: skip
    assert out["answer"] == f"{notes.text} {cite(notes)}"
    # a drying figure the KB holds stands as the answer
    dry = chunk("PETG", "Drying", 0.58)
    temps = chunk("PETG", "Print temperatures", 0.62)
    judge = f"{dry.text} {cite(dry)}"
    out = await ask("How long should PETG be dried?", judge, [temps, dry])
    assert direct(out) == judge


async def test_a_direct_answer_its_quoted_sentence_holds_is_not_said_twice() -> None:
    # held out, "How heavy is C932 bearing bronze, roughly, per cubic centimetre?": the direct
    # answer, then the chunk's sentence that holds it, the same density twice
    density = chunk("C932 bearing bronze", "Density", 0.8)
    strength = chunk("C932 bearing bronze", "Strength", 0.6)
    judge = f"C932 bearing bronze has a density of about 8.90 g/cm3 {cite(density)}."
    question = "How heavy is C932 bearing bronze, roughly, per cubic centimetre?"
    out = await council(question, judge, [judge], [density, strength])
    assert out["answer"].count("8.90") == 1
    assert direct(out) == f"{density.text} {cite(density)}"


@pytest.mark.parametrize(
    ("judge", "sample"),
    [
        # eval sitting at ecbe820: the answers' figures were none of the KB's, so no answer was
        # supported, and the verdict said the KB does not answer although it ranks all three
        (
            "PLA needs the highest nozzle temperature, about 300 °C {pla}.",
            "PETG, at 280 °C {petg}.",
        ),
        ("The knowledge base does not say.", "The knowledge base does not say."),
        ("PA-CF needs the highest nozzle temperature, about 330 °C {pacf}.", "PETG {pla}."),
    ],
)
async def test_a_ranking_the_kbs_figures_settle_leads_though_no_answer_is_supported(
    judge: str, sample: str
) -> None:
    prints = {k: chunk(t, "Print", 0.6) for k, t in
              (("pla", "PLA"), ("petg", "PETG"), ("pacf", "PA-CF"))}  # fmt: skip
    tags = {k: cite(c) for k, c in prints.items()}
    question = "Which of these filaments needs the highest nozzle temperature: PETG, PLA or PA-CF?"
    out = await council(question, judge.format(**tags), [sample.format(**tags)] * 2,
                        list(prints.values()))  # fmt: skip
    lead = out["answer"].split("\n")[0]
    assert (
        lead.startswith("Highest nozzle temperature of 3 compared: PA-CF") and tags["pacf"] in lead
    )
    assert "does not answer" not in out["answer"] and "330" not in out["answer"]
    assert {c["id"] for c in out["citations"]} >= {prints["pacf"].id}


FIGURE_OF_ONE = [
    # (question, the thing's chunk, other things' chunks the judge's answer cited)
    ("How hot can PVDF run continuously?", ("PVDF", "Service"),
     [("PTFE", "Service"), ("UHMW-PE", "Service")]),  # held-out h06, read whole
    ("what nozzle temp should I run HIPS at?", ("HIPS", "Print"), [("PA-CF", "Print")]),  # h03
    ("How heavy is C932 bearing bronze per cubic centimetre?", ("C932 bearing bronze", "Density"),
     [("304 stainless steel", "Density")]),
    ("What's the density of 1018 mild steel?", ("1018 mild steel", "Density"),
     [("304 stainless steel", "Density"), ("C360 brass", "Density")]),
    ("How hard is white oak on the Janka scale?", ("white oak", "Density"),
     [("hard maple", "Density")]),
    ("At what temperature should I dry ABS?", ("ABS", "Drying"), [("PA6 nylon", "Drying")]),
    ("How long does polyurethane glue take to cure?", ("polyurethane glue", "Cure"),
     [("two-part epoxy", "Cure")]),
    ("What bed temperature does PETG need?", ("PETG", "Print"), [("PLA", "Print")]),
    ("How dense is balsa?", ("balsa", "Density"), [("eastern white pine", "Density")]),
    ("At what temperature does C360 brass melt?", ("C360 brass", "Density"),
     [("C932 bearing bronze", "Density")]),
]  # fmt: skip


@pytest.mark.parametrize(("question", "asked", "others"), FIGURE_OF_ONE)
async def test_a_figure_asked_of_one_thing_quotes_no_line_on_another(question, asked, others):
    # held-out at b815ef5: "How hot can PVDF run continuously?" quoted PTFE's and UHMW-PE's
    # service temperatures under PVDF's, because the judge's answer had cited them
    mine, theirs = chunk(*asked, 0.8), [chunk(*o, 0.6) for o in others]
    judge = "\n".join([f"{mine.text} {cite(mine)}", *(f"- {c.text} {cite(c)}" for c in theirs)])
    out = await council(question, judge, [judge, judge], [mine, *theirs])
    assert cite(mine) in out["answer"].split("\n")[0]
    assert not any(cite(c) in out["answer"] for c in theirs), out["answer"]


async def test_a_comparison_of_two_keeps_both_things_lines() -> None:
    bronze, steel = (
        chunk("C932 bearing bronze", "Density", 0.8),
        chunk("304 stainless steel", "Density", 0.7),
    )
    judge = f"{bronze.text} {cite(bronze)}\n- {steel.text} {cite(steel)}"
    out = await council("Which is denser, C932 bearing bronze or 304 stainless steel?", judge,
                        [judge, judge], [bronze, steel])  # fmt: skip
    assert cite(bronze) in out["answer"] and cite(steel) in out["answer"]


TOP_RANKED = [
    # (question, the chunk retrieval ranked first, the chunk the judge's answer cited, quoted?)
    ("Do I really have to dry polypropylene filament before printing?", ("polypropylene", "Drying"),
     ("polypropylene", "Print"), True),  # held-out h04 (read whole: right in one run, not another)
    ("Does PETG need drying before use?", ("PETG", "Drying"), ("PETG", "Print"), True),
    ("Can I glue teak without any prep?", ("teak", "Finishing"), ("teak", "Workability"), True),
    ("Will MDF survive getting wet?", ("MDF", "Outdoor"), ("MDF", "Typical uses"), True),
    ("Does HIPS dissolve in anything?", ("HIPS", "Notes"), ("HIPS", "Typical uses"), True),
    ("Does red oak rot outdoors?", ("red oak", "Outdoor"), ("red oak", "Typical uses"), True),
    ("Is acetal good for gears?", ("acetal", "Applications"), ("acetal", "Friction"), True),
    ("Is HIPS hard to print without an enclosure?", ("HIPS", "Warping"), ("HIPS", "Print"), True),
    # the chunk ranked first says nothing the question asks: still not quoted
    ("Do I really have to dry polypropylene filament before printing?", ("polypropylene", "Heat"),
     ("polypropylene", "Print"), False),
    ("Is acetal good for gears?", ("acetal", "Density"), ("acetal", "Friction"), False),  # its name
]  # fmt: skip


@pytest.mark.parametrize(("question", "top", "cited", "expected"), TOP_RANKED)
def test_the_chunk_ranked_first_is_quoted_where_it_speaks_of_the_question(
    question, top, cited, expected
) -> None:
    from collective.verdict.agreement import Asked
    from collective.verdict.lines import supporting_lines

    first, answered = chunk(*top, 0.9), chunk(*cited, 0.84)  # not first by a wide margin
    others = ("ABS", "Drying"), ("PLA", "Print"), ("white oak", "Cost"), ("PVDF", "Density"),\
        ("C360 brass", "Machining"), ("teak", "Cost")  # fmt: skip
    rest = [chunk(*o, 0.5) for o in others]
    shown = shown_whole({c.id: c for c in [first, answered, *rest]})
    vocabulary = chunk_vocabulary(eval_chunks())
    asked = Asked.read(question, vocabulary, shown.values())
    scores = {c.id: c.score for c in [first, answered, *rest]}
    lines = supporting_lines(asked, shown, scores, [answered.id], vocabulary)
    assert (cite(first) in " ".join(lines)) is expected, lines


@pytest.mark.parametrize(("question", "top", "cited", "expected"), TOP_RANKED)
def test_the_chunk_ranked_first_is_quoted_among_its_own_things_chunks(
    question, top, cited, expected
) -> None:
    # held-out h04 in the eval: most chunks shown were polypropylene's, so its name told none
    # apart, and the drying chunk ranked first shared one word of the question ("dry"): never
    # quoted, while the print settings the judge cited led
    from collective.verdict.agreement import Asked
    from collective.verdict.lines import supporting_lines

    first, answered = chunk(*top, 0.9), chunk(*cited, 0.84)
    own = [dataclasses.replace(c, score=0.6) for c in eval_chunks()
           if c.heading.lower().startswith(f"{top[0].lower()} >")
           and c.id not in (first.id, answered.id)]  # fmt: skip
    rest = [chunk("ABS", "Drying", 0.55), chunk("teak", "Cost", 0.4)]
    every = [first, answered, *own, *rest]
    shown = shown_whole({c.id: c for c in every})
    vocabulary = chunk_vocabulary(eval_chunks())
    asked = Asked.read(question, vocabulary, shown.values())
    lines = supporting_lines(asked, shown, {c.id: c.score for c in every}, [answered.id],
                             vocabulary)  # fmt: skip
    assert (cite(first) in " ".join(lines)) is expected, lines


LEADS = [
    # (the chunk the judge's direct answer cites, the first quoted line's chunk, both scored as
    # retrieval ranked them, the property asked, whether the quoted line leads)
    # retrieval's first by a wide margin, the direct answer on another chunk of the thing
    (("birch plywood", "Workability", 0.755), ("birch plywood", "Outdoor", 0.958), None, True),
    (("red oak", "Typical uses", 0.6), ("red oak", "Outdoor", 0.9), None, True),
    (("MDF", "Typical uses", 0.62), ("MDF", "Outdoor", 0.88), None, True),
    (("teak", "Workability", 0.55), ("teak", "Finishing", 0.85), None, True),
    (("acetal", "Friction", 0.6), ("acetal", "Applications", 0.85), None, True),
    (("HIPS", "Drying", 0.5), ("HIPS", "Notes", 0.77), None, True),
    (("PETG", "Typical uses", 0.4), ("PETG", "Drying", 0.9), "drying time", True),
    # ahead by 0.1 to 0.2, which the bundled questions about one thing show is wide enough:
    # held-out h04 (0.928 against 0.793) and "Can I paint over silicone sealant?" (0.948 against
    # 0.766) as retrieval scored them, then cases of my own
    (("polypropylene", "Print", 0.793), ("polypropylene", "Drying", 0.928), None, True),
    (("silicone sealant", "Safety", 0.766), ("silicone sealant", "What it bonds", 0.948), None,
     True),
    (("PETG", "Print", 0.79), ("PETG", "Drying", 0.9), None, True),
    (("teak", "Cost", 0.7), ("teak", "Outdoor", 0.85), None, True),
    (("C360 brass", "Cost", 0.71), ("C360 brass", "Welding", 0.86), None, True),
    (("PVA", "Print", 0.64), ("PVA", "Notes", 0.77), None, True),
    # not by a wide margin: the judge's answer leads
    (("PETG", "Print", 0.84), ("PETG", "Drying", 0.9), None, False),
    (("teak", "Cost", 0.78), ("teak", "Outdoor", 0.85), None, False),
    (("7075-T6 aluminium", "Machining", 0.91), ("7075-T6 aluminium", "Welding", 1.0), None,
     False),
    (("C360 brass", "Cost", 0.8), ("C360 brass", "Welding", 0.86), None, False),
    # a figure asked: a first line whose chunk states it leads a direct answer that states none
    # (held-out h15: "ABS > HIPS is used for dissolvable supports ..." over its bed figure)
    (("HIPS", "Typical uses", 0.9), ("HIPS", "Print", 0.7), "bed temperature", True),
    (("PETG", "Typical uses", 0.8), ("PETG", "Print", 0.85), "nozzle temperature", True),
    (("acetal", "Applications", 0.8), ("acetal", "Density", 0.75), "density", True),
    (("teak", "Workability", 0.7), ("teak", "Outdoor", 0.75), "janka hardness", False),
    # the direct answer states the figure asked: it answers, and leads
    (("acetal", "Density", 0.6), ("acetal", "Applications", 0.9), "density", False),
    (("6061-T6 aluminium", "Density", 0.5), ("6061-T6 aluminium", "Typical uses", 0.95),
     "density", False),
]  # fmt: skip


@pytest.mark.parametrize(("cited", "first", "prop", "leads"), LEADS)
def test_a_line_retrieval_ranks_first_by_a_wide_margin_leads_the_judges_answer(
    cited, first, prop, leads
) -> None:
    # held-out h13 "Is birch plywood fine to leave outside?": the judge's "Working birch
    # plywood: cuts cleanly ..." led, its outdoor durability (0.958 against 0.755) came second
    from collective.verdict.agreement import Asked
    from collective.verdict.lines import ordered

    said, top, other = chunk(*cited), chunk(*first), chunk("teak", "Density", 0.3)
    direct = f"{said.text} {cite(said)}"
    quoted = [f"{top.text} {cite(top)}", f"{other.text} {cite(other)}"]
    scores = {c.id: c.score for c in (said, top, other)}
    asked = Asked("?", (VOCABULARY.thing_of(said.id).key,), prop)
    lines = ordered(asked, direct, quoted, scores, VOCABULARY)
    assert lines == ([quoted[0], direct, quoted[1]] if leads else [direct, *quoted])


def test_a_line_leads_only_over_a_cited_direct_answer_on_one_thing() -> None:
    from collective.verdict.agreement import Asked
    from collective.verdict.lines import ordered

    said, top = chunk("birch plywood", "Workability", 0.5), chunk("birch plywood", "Outdoor", 0.95)
    line, direct = f"{top.text} {cite(top)}", f"{said.text} {cite(said)}"
    scores = {said.id: said.score, top.id: top.score}
    plywood = VOCABULARY.thing_of(said.id).key
    asked = Asked("Is birch plywood fine outside?", (plywood,))
    assert ordered(asked, direct, [line], scores) == [line, direct]
    assert ordered(asked, "", [line], scores) == [line]  # no direct answer: the lines as they are
    uncited = "Use marine plywood."
    assert ordered(asked, uncited, [line], scores) == [uncited, line]
    both = f"{said.text} {cite(said)} {cite(top)}"  # it cites the first one itself
    assert ordered(asked, both, [line], scores) == [both, line]
    # a choice between things (or none named) is the answers' to make, not retrieval's
    pine = VOCABULARY.thing_of(chunk("eastern white pine", "Outdoor").id).key
    for things in [(plywood, pine), ()]:
        choice = Asked("Which is fine outside, birch plywood or pine?", things)
        assert ordered(choice, direct, [line], scores) == [direct, line]


async def test_the_judges_answer_on_another_chunk_follows_the_one_asked() -> None:
    # held-out h13 through the graph: scores as `collective recall` read them on the eval KB
    work = chunk("birch plywood", "Workability", 0.755)
    outdoor = chunk("birch plywood", "Outdoor", 0.958)
    judge = f"- {work.text} {cite(work)}"  # as the judge wrote it: a bullet
    out = await council("Is birch plywood fine to leave outside?", judge, [judge, judge],
                        [outdoor, work])  # fmt: skip
    first, *rest = out["answer"].splitlines()
    assert cite(outdoor) in first and "delaminate" in first
    assert any(cite(work) in line for line in rest)
    # the direct answer's claim is reported with the verdict's, though written as a bullet
    said = [c for c in out["claims"] if c["cited"] == [work.id]]
    assert said and all(c["status"] == "supported" for c in said), out["claims"]
