"""Hostile inputs (issue 28): huge files, non-KB databases, invisible questions, odd files.

Real parts throughout: real files, FIFOs and sockets, real SQLite databases made by the code
that makes them (LangGraph's checkpointer and store), tiktoken's real cl100k tokenizer. The
council itself on huge chunks, with real model servers, is in
tests/integration/test_hostile_inputs.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sqlite3
import subprocess
import sys
import tracemalloc
import unicodedata
from pathlib import Path

import pytest

from collective.budget.assembly import assemble, chunks_section, text_section
from collective.budget.counting import TokenizerCounter, tiktoken_counter
from collective.budget.plans import SPECIALIST_PRESET, ModelBudget
from collective.budget.trimming import Scored, select_chunks, share_fairly, trim_text
from collective.config import load_config
from collective.errors import ConfigError
from collective.kb.chunking import MAX_CHUNK_CHARS, MAX_TAGS, MAX_TITLE_CHARS, split_text
from collective.kb.retrieval import retrieve
from collective.kb.sqlite_store import APPLICATION_ID, SqliteKnowledgeStore
from collective.prompts import specialist
from collective.question import InvalidQuestion, check_question, is_blank
from tests.cli import one_error_line, run

REPO = Path(__file__).resolve().parents[2]
WORDS = "PETG dries at sixty five degrees and ASA resists sunlight on the bed".split()


def prose(chars: int, sentence_end: str = "") -> str:
    """`chars` characters of words, one paragraph, with no sentence end unless asked."""
    words = " ".join(WORDS) + sentence_end + " "
    return (words * (chars // len(words) + 1))[:chars]


# -- 1. chunk size is bounded at ingest, whatever the file ---------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(prose(2_000_000), id="one paragraph without a sentence end"),
        pytest.param(prose(2_000_000, "."), id="one paragraph of sentences"),
        pytest.param("x" * 2_000_000, id="one enormous word"),
        pytest.param("a line without an end\n" * 90_000, id="no paragraph breaks at all"),
        pytest.param("```\n" + "code = 1\n" * 200_000 + "```\n", id="one huge code block"),
        pytest.param("x" + "e\u0301" * 1_000_000, id="letters with combining marks"),
    ],
)
def test_no_chunk_is_longer_than_the_bound_and_nothing_is_lost(text: str) -> None:
    chunks = split_text(text)
    assert len(chunks) > 100
    assert max(len(c.text) for c in chunks) <= MAX_CHUNK_CHARS
    # Splitting only moves whitespace: every other character is kept, in order.
    assert "".join("".join(c.text for c in chunks).split()) == "".join(text.split())
    # A hard cut never separates a combining mark from its letter.
    assert not any(unicodedata.combining(c.text[0]) for c in chunks)


def test_a_huge_heading_or_tag_line_does_not_grow_every_chunk() -> None:
    text = (
        "tags: " + ", ".join(f"tag{i}" for i in range(50_000)) + f", {'t' * 500}\n\n"
        "# " + "Title " * 100_000 + "\n\n" + prose(50_000, ".")
    )
    chunks = split_text(text)
    assert len(chunks) > 10
    assert all(len(c.heading) <= MAX_TITLE_CHARS and len(c.tags) <= MAX_TAGS for c in chunks)
    assert all(len(tag) <= 64 for c in chunks for tag in c.tags)


# -- 1. counting never sends a tokenizer more than a section could hold ------------------------


class RecordingCounter(TokenizerCounter):
    """tiktoken's real cl100k tokenizer, remembering the longest text it was asked to encode."""

    def __init__(self) -> None:
        real = tiktoken_counter("cl100k_base")
        self.longest = 0

        def encode(text: str) -> list[int]:
            self.longest = max(self.longest, len(text))
            return list(real.encode(text))

        super().__init__("exact:recording", encode, real.decode)


HUGE = prose(20_000_000, ".")
"""A 20 MB chunk, as an old KB may hold (one paragraph stored whole before the ingest bound)."""


def reach_bound(max_tokens: int) -> int:
    """What 'proportional to the budget' means here: far below the 20 MB."""
    return 32 * max(max_tokens, 1024)


def test_chunks_far_larger_than_the_section_are_cut_before_they_are_counted() -> None:
    counter = RecordingCounter()
    chunks = [
        Scored("mem_huge", f"[KB#mem_huge] {HUGE}", 0.9, mark="[KB#mem_huge]"),
        Scored("mem_small", "[KB#mem_small] ASA resists UV.", 0.5, mark="[KB#mem_small]"),
    ]
    fitted = select_chunks(counter, chunks, 1000)
    assert counter.longest <= reach_bound(1000)
    assert fitted.tokens <= 1000 and counter.count(fitted.text) <= 1000
    # The best chunk is trimmed rather than lost, its tag whole; the header says the offered
    # count is a lower bound.
    assert fitted.kept == ("mem_huge",)
    assert fitted.text.startswith("[Context trimmed to ") and "+ tokens" in fitted.text
    assert "[KB#mem_huge] PETG dries" in fitted.text


@pytest.mark.parametrize("keep", ["start", "end", "both"])
def test_trim_text_of_a_huge_text_counts_only_what_the_budget_could_show(keep) -> None:
    counter = RecordingCounter()
    text = "FIRST " + HUGE + " LAST"
    fitted = trim_text(counter, text, 500, keep=keep)
    assert counter.longest <= reach_bound(500)
    assert fitted.trimmed and fitted.tokens == counter.count(fitted.text) <= 500
    assert "+ tokens trimmed" in fitted.text  # the real count is larger than it can say
    assert fitted.text.startswith("FIRST") == (keep != "end")
    assert fitted.text.endswith("LAST") == (keep != "start")


def test_share_fairly_and_cutting_on_tokens_never_count_a_huge_text_whole() -> None:
    counter = RecordingCounter()
    parts = share_fairly(counter, [HUGE, "A short proposal."], 800)
    assert parts[1].text == "A short proposal." and not parts[1].trimmed
    assert parts[0].trimmed and sum(p.tokens for p in parts) <= 800
    assert counter.head(HUGE, 300) == counter.decode(counter.encode(HUGE[:10_000])[:300])
    assert counter.tail(HUGE, 300) == counter.decode(counter.encode(HUGE[-10_000:])[-300:])
    assert counter.longest <= reach_bound(800)


def test_text_of_long_tokens_is_still_counted_exactly_before_it_is_cut() -> None:
    # cl100k has 128-space tokens: far more characters per token than the first cut guesses.
    counter = RecordingCounter()
    spaces = " " * 10_000_000 + "end"
    fitted = trim_text(counter, spaces, 200, keep="start")
    assert fitted.tokens == counter.count(fitted.text) <= 200
    assert counter.longest <= 200 * 128 * 16  # grows with the budget, not the text
    short = " " * 20_000 + "end"  # about 160 tokens: it fits, and is kept whole
    assert trim_text(counter, short, 200).text == short


def test_assembling_a_prompt_with_a_huge_chunk_fits_and_counts_little() -> None:
    counter = RecordingCounter()
    plan = SPECIALIST_PRESET.fit_to_context(8192, "test").with_output(64)
    chunk = Scored("mem_huge", f"[KB#mem_huge] {HUGE}", 0.9, mark="[KB#mem_huge]")
    prompt = assemble(
        plan,
        counter,
        [
            text_section("system", specialist.SYSTEM),
            text_section("task", "Which filament for a hot car?"),
            chunks_section("kb_chunks", [chunk]),
        ],
        specialist.compose,
        node="specialist-1",
        model="cl100k",
    )
    assert prompt.report.prompt_tokens + plan.output_budget <= plan.n_ctx
    assert prompt.kept("kb_chunks") == ["mem_huge"]
    assert counter.longest <= reach_bound(plan.n_ctx)


@pytest.mark.parametrize("requested", ["auto", "split"])
def test_split_evidence_never_counts_a_huge_chunk_whole(requested) -> None:
    from collective.kb.evidence import MemberEvidence

    counter = RecordingCounter()
    chunks = [Scored("mem_huge", f"[KB#mem_huge] {HUGE}", 0.9, mark="[KB#mem_huge]")] + [
        Scored(f"mem_{i}", f"[KB#mem_{i}] ASA resists UV, note {i}.", 0.5, mark=f"[KB#mem_{i}]")
        for i in range(6)
    ]
    for index in range(3):
        fitted = MemberEvidence(chunks, 3, index, requested).section().fit(counter, 1000)
        assert fitted.tokens <= 1000 and fitted.kept
    assert counter.longest <= reach_bound(1000)


# -- 2. recall shows a bounded excerpt; retrieval never splits a huge chunk into words ----------


def legacy_kb(path: Path, text: str) -> Path:
    """A KB holding one huge chunk, as `kb add` stored a one-paragraph file before the bound."""
    with SqliteKnowledgeStore(path) as store:
        store._db.execute(
            "INSERT INTO chunks(id, source, heading, text, tags, position) VALUES (?,?,?,?,?,?)",
            ("mem_0123456789abcdef", "big.txt", "", text, "", 0),
        )
        store._db.commit()
    return path


@pytest.mark.usefixtures("clean_cwd")
def test_recall_shows_a_bounded_excerpt_of_a_huge_chunk(tmp_path: Path) -> None:
    kb = legacy_kb(tmp_path / "kb.sqlite", prose(500_000, "."))
    status, out, err = run(["recall", "PETG sunlight", "--kb", str(kb)])
    assert status == 0, err
    assert "[KB#mem_0123456789abcdef]" in out
    assert "more characters not shown" in out
    assert len(out) < 3 * MAX_CHUNK_CHARS + 5_000


def test_retrieval_does_not_split_a_huge_chunk_into_words(tmp_path: Path) -> None:
    kb = legacy_kb(tmp_path / "kb.sqlite", prose(5_000_000, "."))
    with SqliteKnowledgeStore(kb) as store:
        tracemalloc.start()
        try:
            for profile in ("lean", "balanced", "deep"):
                assert retrieve(store, "PETG sunlight and bed", profile).injected
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    # The chunk is 5 MB; as a list of words it took 90 MB.
    assert peak < 40_000_000


# -- 3. a database that is not a KB is refused and never written to -----------------------------


def memory_database(path: Path) -> Path:
    from collective.memory.store import open_sqlite_store

    store = open_sqlite_store(path)
    store.put(("collective", "memory", "default", "t1"), "turn", {"text": "hello"})
    store.conn.close()
    return path


def checkpoint_database(path: Path) -> Path:
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from collective.memory.store import open_checkpointer

    class State(TypedDict):
        x: int

    async def write() -> None:
        async with contextlib.AsyncExitStack() as stack:
            saver = await open_checkpointer(path, stack)
            builder = StateGraph(State)
            builder.add_node("one", lambda s: {"x": s["x"] + 1})
            builder.add_edge(START, "one")
            builder.add_edge("one", END)
            graph = builder.compile(checkpointer=saver)
            await graph.ainvoke({"x": 1}, {"configurable": {"thread_id": "t"}})

    asyncio.run(write())
    return path


def other_database(path: Path) -> Path:
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        db.execute("INSERT INTO notes(body) VALUES ('mine')")
        db.commit()
    return path


def look_alike_database(path: Path) -> Path:
    """Tables named like a KB's, with other columns: still not a KB."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE chunks (id TEXT, body TEXT)")
        db.execute("CREATE TABLE sources (source TEXT)")
        db.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(body)")
        db.commit()
    return path


@pytest.mark.usefixtures("clean_cwd")
@pytest.mark.parametrize(
    "make", [memory_database, checkpoint_database, other_database, look_alike_database]
)
@pytest.mark.parametrize(
    "command",
    [
        ["kb", "list", "--kb"],
        ["kb", "list", "--json", "--kb"],
        ["kb", "rm", "mem_0123456789abcdef", "--kb"],
        ["recall", "PETG", "--kb"],
        ["kb", "add", "notes.md", "--kb"],
        ["ask", "PETG or ASA?", "--kb"],  # before any server check or checkpoint
        ["chat", "--kb"],
    ],
)
def test_a_database_that_is_not_a_kb_is_refused_and_left_untouched(
    tmp_path: Path, make, command
) -> None:
    (tmp_path / "notes.md").write_text("# PETG\n\nDry it at 65 °C.\n", "utf-8")
    folder = tmp_path / "db"
    folder.mkdir()
    database = make(folder / "data.sqlite")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    status, out, err = run([*command, str(database)])
    assert status == 2
    assert "not a collective knowledge base" in one_error_line(err)
    assert "Traceback" not in out
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert after == before  # not a byte, not a new -wal or -shm file


def test_a_kb_made_before_the_mark_is_still_a_kb_and_new_kbs_carry_the_mark(
    tmp_path: Path,
) -> None:
    kb = tmp_path / "kb.sqlite"
    with SqliteKnowledgeStore(kb) as store:
        store.add_file(REPO / "collective" / "data" / "demo_kb" / "petg.md")
    with contextlib.closing(sqlite3.connect(kb)) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        db.execute("PRAGMA application_id = 0")  # what today's code wrote: no mark
        db.commit()
    with SqliteKnowledgeStore(kb) as store:
        assert store.count() > 0 and store.search("PETG drying", 3)
    empty = tmp_path / "empty.sqlite"
    empty.touch()  # an empty file is an empty database: it becomes a new KB
    with SqliteKnowledgeStore(empty) as store:
        assert store.count() == 0


def test_a_file_that_is_not_a_database_is_one_line_exit_2_for_kb_list(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    status, _, err = run(["kb", "list", "--kb", str(tmp_path / "notes.txt")])
    assert status == 2 and "file is not a database" in one_error_line(err)


# -- 4. a question of invisible characters is blank ----------------------------------------------

INVISIBLE = [
    "\u200b",  # zero width space (Cf)
    "\ufeff",  # byte order mark (Cf)
    "\u2800",  # braille pattern blank (So)
    "\u3164",  # hangul filler (Lo)
    "\u115f\u1160",  # hangul choseong / jungseong fillers (Lo)
    "\uffa0",  # halfwidth hangul filler (Lo)
    "\u00a0\u2003\u3000",  # no-break, em and ideographic spaces (Zs)
    "\u2028\u2029",  # line and paragraph separators (Zl, Zp)
    "\x00\x1b\x7f\x85",  # controls (Cc)
    "\u200d\u200e\u202e\u2066\u2060\u00ad",  # joiners, marks, bidi controls, soft hyphen (Cf)
    "\ufe0f\U000e0100",  # variation selectors (Mn)
    "\U000e0041\U000e007f",  # tag characters (Cf)
    "\u0301\u20dd",  # marks with no letter (Mn, Me)
    "\u180e\u17b4",  # mongolian vowel separator (Cf), khmer inherent vowel (Mn)
    "\U0001d173\U0001bca0",  # musical and shorthand format controls (Cf)
    " \t\n\u200b\u2800 \ufeff ",  # a mix
]


@pytest.mark.parametrize(
    "question", INVISIBLE, ids=lambda q: ",".join(f"U+{ord(c):04X}" for c in q)
)
def test_a_question_of_invisible_characters_is_blank(question: str) -> None:
    assert is_blank(question)
    with pytest.raises(InvalidQuestion, match="the question is empty"):
        check_question(question)


def test_blank_holds_for_every_character_of_the_invisible_categories() -> None:
    categories = {"Zs", "Zl", "Zp", "Cc", "Cf", "Mn", "Me"}
    invisible = [
        chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in categories
    ]
    assert len(invisible) > 2000
    assert all(is_blank(char) for char in invisible)
    for visible in ("a", "é", "?", "1", "漢", "ㄱ", "\u2801", "🙂", "A\u200b", "\u200bPETG"):
        assert not is_blank(visible)
        assert check_question(visible)[0] == visible


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.usefixtures("clean_cwd")
@pytest.mark.parametrize("question", ["\u200b", "\ufeff", "\u2800", "\u3164 \u200b"])
def test_the_cli_refuses_an_invisible_question_before_any_server_check(
    tmp_path: Path, question: str
) -> None:
    (tmp_path / "c.toml").write_text(f'planner = "llama-server:http://127.0.0.1:{closed_port()}"\n')
    status, out, err = run(["ask", question, "--config", "c.toml"])
    assert status == 2  # not 3: no server was asked
    assert "the question is empty" in one_error_line(err) and out == ""
    status, _, err = run(["recall", question])
    assert status == 2 and "the query is empty" in one_error_line(err)


async def test_the_graph_refuses_an_invisible_question_before_any_model_runs() -> None:
    from collective.graph import CouncilContext, build_graph
    from tests.fakes import ScriptedBackend

    backends = [ScriptedBackend(name, "ASA.") for name in ("plan", "spec", "judge")]
    ctx = CouncilContext(
        k=1, planner=backends[0], specialists=[backends[1]], judge=backends[2], judge_tools=False
    )
    for question in ("\u200b", "\ufeff\u2800", "\u3164"):
        with pytest.raises(InvalidQuestion, match="the question is empty"):
            await build_graph().ainvoke({"question": question}, context=ctx)
    assert all(not b.calls for b in backends)


# -- 7. odd files, bad ports, incomplete plans -------------------------------------------------


@pytest.mark.usefixtures("clean_cwd")
def test_kb_add_dir_refuses_each_file_that_is_not_a_regular_file(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "petg.md").write_text("# PETG\n\nDry PETG at 65 °C for four hours.\n", "utf-8")
    (docs / "dangling.md").symlink_to(docs / "missing.md")
    os.mkfifo(docs / "pipe.txt")
    os.mkfifo(docs / "pipe")  # no text suffix: still not silently skipped
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(docs / "socket.md"))
        status, out, err = run(["kb", "add", str(docs), "--kb", str(tmp_path / "kb.sqlite")])
    assert status == 1
    refused = {
        Path(line.split(": ")[0].removeprefix("refused ")).name: line
        for line in err.splitlines()
        if line.startswith("refused ")
    }
    assert sorted(refused) == ["dangling.md", "pipe", "pipe.txt", "socket.md"], err
    assert "a symbolic link to" in refused["dangling.md"]
    assert "is a named pipe (FIFO), not a regular file" in refused["pipe"]
    assert "is a named pipe (FIFO), not a regular file" in refused["pipe.txt"]
    assert "is a socket, not a regular file" in refused["socket.md"]
    assert "1 chunks added" in out and "4 refused" in out


def test_kb_add_of_a_fifo_or_a_device_does_not_block(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")
    done = subprocess.run(
        [sys.executable, "-m", "collective.cli", "kb", "add", "pipe.md", "/dev/zero"]
        + ["--kb", "kb.sqlite"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,  # before the fix it waited for a writer forever
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 1, done.stderr
    assert "pipe.md is a named pipe (FIFO), not a regular file" in done.stderr
    assert "/dev/zero is a character device, not a regular file" in done.stderr


@pytest.mark.usefixtures("clean_cwd")
@pytest.mark.parametrize("port", ["99999", "0", "-1", "65536", "8o83"])
@pytest.mark.parametrize(
    ("key", "toml"),
    [
        ("planner", 'planner = "llama-server:http://127.0.0.1:{port}"'),
        ("judge", 'judge = ["embedded", "ollama:judge@http://127.0.0.1:{port}"]'),
        ("specialists.0.backend", '[[specialists]]\nbackend = "llama-server:http://h:{port}"'),
        ("chat", 'chat = "llama-server:https://h:{port}/v1"'),
        ("rewriter", 'rewriter = "ollama:m@http://h:{port}"'),
    ],
)
def test_a_backend_url_with_an_invalid_port_is_refused_with_its_field_path(
    tmp_path: Path, port: str, key: str, toml: str
) -> None:
    (tmp_path / "c.toml").write_text(toml.format(port=port) + "\n")
    with pytest.raises(ConfigError, match=rf"{key}: invalid backend spec .* no valid port"):
        load_config(tmp_path / "c.toml")


@pytest.mark.usefixtures("clean_cwd")
def test_valid_ports_still_pass() -> None:
    for url in ("http://127.0.0.1:1", "http://h:65535", "https://h", "http://[::1]:8083"):
        assert load_config(None, {"planner": f"llama-server:{url}"}).config.planner


def test_assemble_refuses_a_plan_without_a_section_the_prompt_needs() -> None:
    plan = ModelBudget("no-task", 8192, 4000, 512, {"system": 2000, "kb_chunks": 2000})
    with pytest.raises(ConfigError, match="'no-task' has no 'task' section"):
        assemble(
            plan,
            tiktoken_counter("cl100k_base"),
            [text_section("system", "Rules."), text_section("task", "PETG or ASA?")],
            specialist.compose,
            node="specialist-1",
            model="m",
        )
