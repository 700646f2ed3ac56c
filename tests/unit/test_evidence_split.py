"""Split evidence: K members share out candidates too many for one KB section."""

import dataclasses
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collective.budget.assembly import assemble, text_section
from collective.budget.counting import EstimateCounter, tiktoken_counter
from collective.budget.plans import SPECIALIST_PRESET
from collective.budget.trimming import Scored, select_chunks
from collective.graph import build_graph
from collective.kb.evidence import SLICE, MemberEvidence, council_evidence, split
from collective.kb.store import Chunk
from collective.prompts import council
from collective.prompts import specialist as prompt
from tests.fakes import ListStore, ScriptedBackend
from tests.unit.test_graph_council import context

COUNTERS = [tiktoken_counter("cl100k_base"), EstimateCounter()]
vocabulary = st.sampled_from("PLA PETG nozzle 230 °C bed density oak brass".split())
words = st.lists(vocabulary, max_size=80)
candidates = st.lists(st.tuples(words, st.floats(0, 1)), max_size=40)


def scored(items):
    return [
        Scored(f"c{i}", f"[KB#c{i}] {' '.join(w)}", s, mark=f"[KB#c{i}]")
        for i, (w, s) in enumerate(items)
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counter_index=st.integers(0, len(COUNTERS) - 1),
    items=candidates,
    k=st.integers(1, 7),
    limit=st.integers(0, 1500),
    requested=st.sampled_from(["split", "auto"]),
)
def test_split_keeps_the_shared_set_and_slices_are_disjoint(
    counter_index, items, k, limit, requested
):
    counter = COUNTERS[counter_index]
    chunks = scored(items)
    shared = set(select_chunks(counter, chunks, limit).kept)  # every member's, in shared mode
    parts = [split(counter, chunks, limit, k, i, requested) for i in range(k)]
    kept = [set(select_chunks(counter, p.offered, limit).kept) for p in parts]
    if requested == "auto" and parts[0].mode == "shared":
        assert all(kept_i == shared for kept_i in kept)
        return
    head = set(parts[0].head)
    assert all(set(p.head) == head for p in parts)  # one head for all
    for i, kept_i in enumerate(kept):
        assert head <= kept_i
        for j in range(i + 1, k):
            assert not (kept_i - head) & (kept[j] - head)  # disjoint beyond the head
            assert not set(parts[i].own) & set(parts[j].own)
    assert shared <= set().union(*kept)  # the split never drops what shared mode showed


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counter_index=st.integers(0, len(COUNTERS) - 1),
    items=candidates,
    k=st.integers(1, 6),
    n_ctx=st.integers(900, 40_000),
    repeat=st.integers(1, 30),
)
def test_every_member_prompt_fits_its_budget(counter_index, items, k, n_ctx, repeat):
    counter = COUNTERS[counter_index]
    chunks = [Scored(c.key, c.text * repeat, c.score, c.mark) for c in scored(items)]
    plan = SPECIALIST_PRESET.fit_to_context(n_ctx)
    for index in range(k):
        member = f"specialist-{index + 1}"
        kb = MemberEvidence(chunks, k, index, "split")
        result = assemble(
            plan,
            counter,
            [
                text_section("system", prompt.SYSTEM.format(member=member, k=k)),
                kb.section(),
                council.task_section(prompt.task_text("Which is hottest?", "", member)),
            ],
            prompt.compose,
            node=member,
            model="m",
        )
        report = result.report
        assert report.prompt_tokens + report.max_output_tokens <= plan.n_ctx
        for section in report.sections:
            assert section.used <= (section.granted or section.allocated), section
        assert set(result.kept("kb_chunks")) <= set(kb.part.head) | set(kb.part.own)


def test_auto_splits_only_when_the_candidates_do_not_fit_and_says_why():
    counter = EstimateCounter()
    chunks = scored([(["oak"] * 40, 1 - i / 100) for i in range(12)])
    roomy = split(counter, chunks, 10_000, 3, 0, "auto")
    assert roomy.mode == "shared" and "fit one member's KB section" in roomy.reason
    tight = [split(counter, chunks, 200, 3, i, "auto") for i in range(3)]
    assert all(p.mode == "split" for p in tight)
    assert "exceed one member's KB section of 200" in tight[0].reason
    assert tight[0].head == ("c0",)  # the best chunk is everyone's
    assert tight[0].own[:2] == ("c1", "c4") and tight[1].own[:2] == ("c2", "c5")
    assert split(counter, chunks, 200, 3, 0, "shared").mode == "shared"


def test_the_run_output_says_who_saw_what():
    def part(own):
        return {"mode": "split", "head": ["a"], "own": [own], "seen": ["a", own], "reason": "why"}

    proposals = [
        {"member": "specialist-1", "citations": ["a", "b"], "evidence": part("b")},
        {"member": "specialist-2", "citations": ["a", "c"], "evidence": part("c")},
    ]
    out = council_evidence("auto", proposals)
    assert out["applied"] == "split" and out["reason"] == "why"
    assert out["several"] == ["a"] and out["one_member"] == ["b", "c"]
    assert out["members"][0] == {
        "member": "specialist-1", "mode": "split", "head": 1, "own": 1, "seen": 2
    }  # fmt: skip


def cite_all(messages):
    """A member that cites every chunk its prompt shows."""
    return "Answer. " + " ".join(re.findall(r"\[KB#mem_\w+\]", messages[-1]["content"]))


async def test_a_council_run_splits_when_the_candidates_exceed_a_members_section():
    chunks = [
        Chunk(f"mem_{i:02d}", f"Alloy {i} has a density of {i}.{i} g/cm3. " * 3, f"{i}.md", (), 1)
        for i in range(20)
    ]
    tight = {
        "n_ctx": 4096,
        "output": 128,
        "sections": {"system": 300, "kb_chunks": 250, "task": 300},
    }
    members = ScriptedBackend("spec", cite_all)
    ctx = context(
        specialists=[members],
        knowledge=ListStore(chunks),
        retrieval="deep",
        max_inject=20,
        budgets={"specialist": tight},
        judge_tools=False,
    )
    out = await build_graph().ainvoke({"question": "Which alloy is densest?"}, context=ctx)
    evidence = out["evidence"]
    assert evidence["requested"] == "auto" and evidence["applied"] == "split"
    assert "exceed one member's KB section" in evidence["reason"]
    parts = [p["evidence"] for p in out["proposals"]]
    heads = {tuple(p["head"]) for p in parts}
    assert len(heads) == 1 and heads != {()}
    owns = [set(p["seen"]) - set(p["head"]) for p in parts]
    assert owns[0] and not owns[0] & owns[1] and not owns[1] & owns[2] and not owns[0] & owns[2]
    notes = [s["note"] for b in out["budgets"] if b["node"].startswith("specialist")
             for s in b["sections"] if s["name"] == "kb_chunks"]  # fmt: skip
    assert all(note.startswith("split evidence, member") for note in notes) and len(notes) == 3
    # the shared prefix holds the head and the question; each member's slice comes after it
    prompts = [call[-1]["content"] for call in members.calls]
    prefixes = {p.split(SLICE)[0] for p in prompts}
    assert len(prompts) == 3 and len(prefixes) == 1
    (prefix,) = prefixes
    assert "Question: Which alloy is densest?" in prefix
    assert all(f"[KB#{i}]" in prefix for i in parts[0]["head"])
    for prompt_text, own in zip(prompts, owns, strict=True):
        after = prompt_text.split(SLICE)[1]
        assert all(f"[KB#{i}]" in after and f"[KB#{i}]" not in prefix for i in own)
        assert after.index("## Your part") > max(after.index(f"[KB#{i}]") for i in own)
    shared = await build_graph().ainvoke(
        {"question": "Which alloy is densest?"}, context=dataclasses.replace(ctx, evidence="shared")
    )
    assert shared["evidence"]["applied"] == "shared"
    seen_split = set().union(*(p["evidence"]["seen"] for p in out["proposals"]))
    seen_shared = set().union(*(p["evidence"]["seen"] for p in shared["proposals"]))
    assert seen_shared < seen_split  # the council reads more, and loses nothing


def test_the_evidence_setting_reaches_the_run_and_a_wrong_one_is_refused():
    from pydantic import ValidationError

    from collective.config import CollectiveConfig
    from collective.errors import ConfigError

    assert CollectiveConfig().council_context().evidence == "auto"
    assert CollectiveConfig(evidence="split").council_context().evidence == "split"
    with pytest.raises(ValidationError):
        CollectiveConfig(evidence="wide")
    with pytest.raises(ConfigError, match="evidence 'wide'"):
        context(evidence="wide")
