"""The question at the library's edge: refused, repaired or cut, with a note (issue 11, point 6)."""

from __future__ import annotations

import pytest

from collective.graph import CouncilContext, build_graph
from collective.kb.store import Chunk
from collective.question import MAX_QUESTION_CHARS, InvalidQuestion, check_question
from tests.fakes import ScriptedBackend


class OneChunkStore:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def search(self, query: str, k: int) -> list[Chunk]:
        self.queries.append(query)
        return [Chunk("mem_asa", "ASA resists UV.", "asa.md", score=0.9)]

    def get(self, chunk_id: str) -> Chunk | None:
        return None


def council() -> tuple[CouncilContext, list[ScriptedBackend], OneChunkStore]:
    backends = [ScriptedBackend(name, f"{name} says ASA.") for name in ("plan", "spec", "judge")]
    store = OneChunkStore()
    ctx = CouncilContext(
        k=1,
        planner=backends[0],
        specialists=[backends[1]],
        judge=backends[2],
        knowledge=store,
        retrieval="balanced",
        judge_tools=False,
    )
    return ctx, backends, store


@pytest.mark.parametrize("question", ["", "   \n\t ", None, 42])
async def test_an_empty_blank_or_missing_question_is_refused_before_any_model_runs(
    question,
) -> None:
    ctx, backends, store = council()
    with pytest.raises(InvalidQuestion, match="question"):
        await build_graph().ainvoke({"question": question}, context=ctx)
    assert all(not b.calls for b in backends) and not store.queries


async def test_lone_surrogates_are_repaired_with_a_note() -> None:
    ctx, backends, _ = council()
    out = await build_graph().ainvoke({"question": "PETG \udcff or ASA\ud800?"}, context=ctx)
    assert out["question"] == "PETG \ufffd or ASA\ufffd?"
    assert any("2 invalid Unicode" in note and "U+FFFD" in note for note in out["notes"])
    for backend in backends:  # every request body is valid UTF-8 (httpx raised here before)
        for message in backend.calls[0]:
            message["content"].encode("utf-8")


async def test_an_over_long_question_is_cut_with_a_visible_note() -> None:
    ctx, backends, store = council()
    question = "Which filament? " + "x" * 2_000_000
    out = await build_graph().ainvoke({"question": question}, context=ctx)
    assert len(out["question"]) < MAX_QUESTION_CHARS + 100
    assert "question cut" in out["question"]
    assert any("its first 4,000 and its last 4,000 were kept" in note for note in out["notes"])
    assert all(len(q) < MAX_QUESTION_CHARS + 100 for q in store.queries)
    assert out["answer"].splitlines()[0] == "judge says ASA."


def test_check_question_leaves_a_good_question_alone() -> None:
    assert check_question("PETG or ASA?") == ("PETG or ASA?", [])
    text, notes = check_question("y" * 10, max_chars=4)
    assert text == "yy\n[… question cut: 6 characters left out here …]\nyy" and len(notes) == 1
