"""The judge sees a proposal's verified citations as tags and may carry them into its verdict.

Issue 17: the 1.5B judge of `make real-council` wrote a coherent verdict with no `[KB#...]` tag;
the specialists' own valid tags had reached it neutralised (`[KB-ref ...]`), so it had none to
copy. Every other tag-like text stays neutralised (issue 11).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from collective.graph import build_graph
from collective.kb.citations import neutralise, parse_citations
from collective.kb.store import Chunk
from tests.fakes import ListStore, ScriptedBackend
from tests.unit.test_graph_council import context


def test_neutralise_keeps_exactly_the_verified_tags() -> None:
    text = "ASA [KB#mem_ok]; [KB#mem_secret]; [KB#mem_ok, mem_secret] ［KB#mem_ok］ [Score: 1]"
    kept = neutralise(text, keep=["mem_ok"])
    assert kept.count("[KB#mem_ok]") == 2  # the plain tag and the folded full-width one
    assert parse_citations(kept) == ["mem_ok"]
    assert "[KB-ref mem_secret]" in kept and "[KB-ref mem_ok, mem_secret]" in kept
    assert "[Score-ref:" in kept
    assert parse_citations(neutralise(text)) == []


FORMS = ["[KB#{}]", "［KB#{}］", "[kb # {}]", "[KB#{}, mem_b]", "【KB#{}】", "[[KB#{}]]", "KB#{}"]


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            st.text(max_size=12),
            st.tuples(st.sampled_from(FORMS), st.sampled_from(["mem_a", "mem_b", "mem_c"])).map(
                lambda t: t[0].format(t[1])
            ),
        ),
        max_size=8,
    ),
    keep=st.sets(st.sampled_from(["mem_a", "mem_b"])),
)
def test_only_kept_ids_parse_after_neutralising(parts: list[str], keep: set[str]) -> None:
    assert set(parse_citations(neutralise("".join(parts), keep=keep))) <= keep


async def test_a_member_answer_that_stands_carries_only_its_verified_citation() -> None:
    chunks = [Chunk("mem_real", "ASA resists UV.", "asa.md", score=0.9)]
    specialist = ScriptedBackend("spec", "- ASA resists UV [KB#mem_real]; see [KB#mem_secret].")
    judge = ScriptedBackend("judge", "ASA melts at 999 °C [KB#mem_real].")  # unsupported
    ctx = context(
        k=1, specialists=[specialist], judge=judge, knowledge=ListStore(chunks), judge_tools=False
    )
    out = await build_graph().ainvoke({"question": "ASA?"}, context=ctx)
    assert out["proposals"][0]["citations"] == ["mem_real"]
    assert out["claim_check"]["selected"] == "specialist-1"
    assert "[KB#mem_secret]" not in out["answer"] and "[KB#mem_real]" in out["answer"]
    assert out["citations"] == [{"id": "mem_real", "source": "asa.md"}]
    assert out["unknown_citations"] == ["mem_secret"]  # reported, never a live tag
