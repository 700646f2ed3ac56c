"""What `collective serve` lets a client read: the readable end of an answer, the streamed
pieces, the progress lines, the question and conversation it takes from a chat request.

Each rule is tried on inputs of our own (not the issue's): a dropped line is never quoted,
every kept claim is shown with its status, the streamed pieces are the verdict exactly.
"""

from __future__ import annotations

import pytest

from collective.serve import openai_shapes as shapes
from collective.serve.runs import _exchanges, thread_key, usage_of


def claim(text: str, status: str, cited: tuple[str, ...] = ("c1",)) -> dict:
    return {"text": text, "cited": list(cited), "status": status, "reason": "why"}


RESULTS = [
    # 1. nothing cited, no claims
    {"answer": "No chunk covers this.", "citations": [], "claims": []},
    # 2. one supported claim
    {
        "answer": "PETG softens at 80 C [KB#c1].",
        "citations": [{"id": "c1", "source": "petg.md"}],
        "claims": [claim("PETG softens at 80 C .", "supported")],
    },
    # 3. every claim dropped
    {
        "answer": "",
        "citations": [],
        "claims": [claim("Nylon melts at 9 C .", "dropped"), claim("ABS is edible .", "dropped")],
    },
    # 4. a dropped claim whose words are also in a kept one's source name
    {
        "answer": "ASA resists UV [KB#a].",
        "citations": [{"id": "a", "source": "asa-uv.md"}],
        "claims": [
            claim("ASA resists UV .", "supported", ("a",)),
            claim("UV kills ASA .", "dropped"),
        ],
    },
    # 5. unknown citations reported, never as sources
    {
        "answer": "TPU flexes [KB-ref nope].",
        "citations": [],
        "unknown_citations": ["nope"],
        "claims": [claim("TPU flexes .", "uncited", ())],
    },
    # 6. a claim longer than the shown length
    {
        "answer": "x",
        "citations": [{"id": "c1", "source": "long.md"}],
        "claims": [claim("word " * 60, "retagged")],
    },
    # 7. a claim with line breaks and tabs in it
    {
        "answer": "y",
        "citations": [{"id": "c1", "source": "s.md"}],
        "claims": [claim("PLA\nwarps\tin cars .", "fixed")],
    },
    # 8. several sources, one without a source name
    {
        "answer": "z",
        "citations": [{"id": "c1", "source": "a.md"}, {"id": "c2"}],
        "claims": [claim("A .", "supported"), claim("B .", "supported", ("c2",))],
    },
    # 9. a dropped claim with quotes and a tag in its text
    {
        "answer": "ok",
        "citations": [],
        "claims": [claim('He said "PC is 300 C" [KB#c9] .', "dropped")],
    },
    # 10. statuses mixed, in an order the check gives
    {
        "answer": "m",
        "citations": [{"id": "c1", "source": "m.md"}],
        "claims": [
            claim("First .", "uncited", ()),
            claim("Second .", "dropped"),
            claim("Third .", "supported"),
            claim("Fourth .", "retagged"),
        ],
    },
]


@pytest.mark.parametrize("result", RESULTS)
def test_the_readable_end_never_quotes_a_dropped_line(result):
    text = shapes.appendix(result)
    assert text.startswith("\n\n---\n")
    for c in result["claims"]:
        words = " ".join(c["text"].split())
        if c["status"] == "dropped":
            assert words not in text and words[:12] not in text
        else:
            assert f"[{c['status']}] {words[:40]}" in text
    dropped = sum(c["status"] == "dropped" for c in result["claims"])
    assert (f"Left out: {dropped} line(s)" in text) == bool(dropped)
    for citation in result["citations"]:
        assert f"[KB#{citation['id']}]" in text
    for unknown in result.get("unknown_citations", []):
        assert f"Cited but never supplied (ignored): {unknown}" in text
    if not result["citations"]:
        assert "Sources: none" in text


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "one line",
        "two\nlines",
        "ends with a newline\n",
        "\n\nblank lines first",
        "a\r\nwindows line",
        "unicode: 60–80 °C ✓",
        "a [KB#x] tag\n- a list\n- of two",
        "no\u2028separator surprises",
        "trailing spaces   \n  and leading",
    ],
)
def test_the_streamed_pieces_are_the_verdict_exactly(answer):
    pieces = list(shapes.verdict_pieces(answer))
    assert "".join(pieces) == answer and all(pieces)


def test_the_verdict_is_streamed_a_sentence_at_a_time():
    verdict = (
        "Use ASA [KB#a]. It keeps its shape at 90 C! PETG? No.\nA 1.5 mm wall, e.g. two lines."
    )
    assert list(shapes.verdict_pieces(verdict)) == [
        "Use ASA [KB#a]. ",
        "It keeps its shape at 90 C! ",
        "PETG? ",
        "No.\n",
        "A 1.5 mm wall, e.g. ",
        "two lines.",
    ]


@pytest.mark.parametrize(
    ("event", "line"),
    [
        ({"type": "progress", "node": "retrieve", "status": "running"}, "retrieve: running"),
        (
            {"type": "progress", "node": "judge", "status": "running", "model": "qwen"},
            "judge: running (qwen)",
        ),
        (
            {
                "type": "progress",
                "node": "specialist-2",
                "status": "done",
                "tokens_out": 118,
                "ms": 4100,
            },
            "specialist-2: done, 118 tokens in 4.1 s",
        ),
        (
            {"type": "progress", "node": "retrieve", "status": "done", "ms": 12.0},
            "retrieve: done in 12 ms",
        ),
        (
            {"type": "progress", "node": "specialist-1", "status": "failed", "error": "timeout"},
            "specialist-1: failed: timeout",
        ),
        ({"type": "progress", "node": "judge", "status": "waiting"}, None),
        (
            {"type": "progress", "node": "judge", "status": "waiting", "message": "slot busy"},
            "judge: waiting: slot busy",
        ),
        ({"type": "token", "node": "judge", "text": "draft words"}, None),  # never the draft
        ({"type": "fault", "node": "judge", "message": "replica lost"}, "judge: replica lost"),
        ({"type": "note", "text": "resuming"}, "resuming"),
        ({"type": "budget", "node": "judge", "report": {}}, None),
    ],
)
def test_progress_lines(event, line):
    assert shapes.progress_line(event) == line


def test_the_question_is_the_last_user_message_and_the_rest_is_the_conversation():
    request = shapes.ChatRequest.model_validate(
        {
            "model": "collective",
            "messages": [
                {"role": "system", "content": "be brief"},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
                {"role": "assistant", "content": "answer"},
                {"role": "tool", "content": "tool output"},
                {"role": "user", "content": "the question"},
            ],
            "temperature": 0.3,
        }
    )
    assert request.question() == "the question"
    assert request.earlier() == [("user", "ab"), ("assistant", "answer")]
    for last in ({"role": "assistant", "content": "x"}, {"role": "system", "content": "x"}):
        with pytest.raises(ValueError, match="end with the user's question"):
            shapes.ChatRequest.model_validate({"model": "m", "messages": [last]}).question()
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}
    with pytest.raises(ValueError, match="image_url"):
        shapes.ChatRequest.model_validate({"model": "m", "messages": [image]}).question()


@pytest.mark.parametrize(
    ("turns", "pairs"),
    [
        ([], []),
        ([("user", "q")], []),  # a question with no answer yet: nothing to remember
        ([("user", "q"), ("assistant", "a")], [("q", "a")]),
        ([("user", "q1"), ("user", "q2"), ("assistant", "a")], [("q1\nq2", "a")]),
        ([("assistant", "hello")], [("", "hello")]),
        ([("user", "q"), ("assistant", "a1"), ("assistant", "a2")], [("q", "a1"), ("", "a2")]),
        (
            [("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2")],
            [("q1", "a1"), ("q2", "a2")],
        ),
        ([("user", "q1"), ("assistant", "a1"), ("user", "q2")], [("q1", "a1")]),
        ([("user", ""), ("assistant", "")], [("", "")]),
        ([("user", "[KB#x] q"), ("assistant", "a [KB#y]")], [("[KB#x] q", "a [KB#y]")]),
    ],
)
def test_earlier_turns_become_question_and_answer_pairs(turns, pairs):
    assert _exchanges(turns) == pairs


def test_thread_keys_are_digests_that_keep_names_apart():
    names = ["alice", "Alice", "alice ", "bob", "", "../../etc", "a" * 200, "ü", "1", "serve-x"]
    keys = [thread_key(n) for n in names]
    assert len(set(keys)) == len(names)
    assert all(k.startswith("serve-") and len(k) == 30 for k in keys)
    assert thread_key("alice") == thread_key("alice")
    assert all(name not in key for name, key in zip(names[:4], keys[:4], strict=True))


def test_usage_sums_every_budgeted_call():
    budgets = [
        {"prompt_tokens": 100, "output_tokens": 20},
        {"prompt_tokens": 50, "output_tokens": None},  # a call that failed: no answer tokens
        {"prompt_tokens": 7, "output_tokens": 3},
    ]
    assert usage_of({"budgets": budgets}) == {
        "prompt_tokens": 157,
        "completion_tokens": 23,
        "total_tokens": 180,
    }
    assert usage_of({}) == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
