"""Faults a user is told about: lost replicas, cut questions, files that add nothing, databases of
the wrong kind, special and bottomless files, the OpenAI client's `/v1` habit (issue 38).

Real parts throughout: real files, FIFOs and devices, real SQLite databases made by the code that
makes them, the CLI in process. The replicas on real llama-servers (one killed mid-answer, one
never started) are in tests/integration/test_replicas.py; here a replica whose pool cannot be
read is a scripted backend, the one fault of that kind that needs no server.
"""

from __future__ import annotations

import contextlib
import io
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from collective.budget.assembly import text_section
from collective.budgeted_call import budgeted_call
from collective.commands.render import render_result
from collective.errors import BackendUnavailable, ConfigError
from collective.graph import CouncilContext
from collective.kb.sqlite_store import SqliteKnowledgeStore
from collective.models.admission import ServerPool
from collective.models.registry import backend_from_spec, check_spec
from collective.models.replicas import ReplicaSet
from collective.question import MAX_QUESTION_CHARS, InvalidQuestion, check_question, read_question
from collective.session import _output
from tests.cli import clean_cwd, one_error_line, run  # noqa: F401
from tests.fakes import ScriptedBackend
from tests.unit.test_hostile_inputs import (
    checkpoint_database,
    look_alike_database,
    memory_database,
    other_database,
)

REPO = Path(__file__).resolve().parents[2]


# -- 1. a lost replica is named: report, span, stream, notes, --quiet, chat --------------------


class NoPool(ScriptedBackend):
    """A replica whose server does not answer `pool()` (its /props and /slots are gone)."""

    async def pool(self) -> ServerPool | None:
        raise BackendUnavailable(f"{self.spec} refused the connection")


async def ask(backend, **kwargs):
    return await budgeted_call(
        CouncilContext(usage_log=None),
        role="specialist",
        agent="specialist-1",
        backend=backend,
        contents=[text_section("task", "PETG or ASA?")],
        compose=lambda s: [{"role": "user", "content": s["task"]}],
        question="PETG or ASA?",
        **kwargs,
    )


async def test_a_replica_whose_pool_cannot_be_read_is_noted_not_silently_dropped() -> None:
    dead, alive = NoPool("a"), ScriptedBackend("b", reply="ASA.")
    events: list[dict] = []
    call = await ask(ReplicaSet([dead, alive]), on_event=events.append)
    assert call.result.text == "ASA." and call.report.server == "scripted:b"
    [fault] = call.report_dict["faults"]
    assert fault["server"] == "scripted:a"
    assert (
        "KV pool could not be read" in fault["failed"]
        and "refused the connection" in fault["failed"]
    )
    assert fault["instead"] == "the call ran on scripted:b"
    assert fault["message"] in call.report.notes
    assert [e["server"] for e in events if e["type"] == "fault"] == ["scripted:a"]


async def test_a_replica_down_before_the_first_token_says_where_the_call_ran() -> None:
    dead = ScriptedBackend("a", failures=[BackendUnavailable("connection refused by a")])
    call = await ask(ReplicaSet([dead, ScriptedBackend("b", reply="ASA.")]))
    [fault] = call.report.faults
    assert "failed before the first token" in fault["failed"]
    assert "connection refused by a" in fault["failed"]
    assert fault["instead"] == "the call ran on scripted:b"


async def test_a_replica_fault_is_an_event_on_the_model_calls_span() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from collective import telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = telemetry.tracer
    telemetry.tracer = provider.get_tracer("test")
    try:
        await ask(ReplicaSet([NoPool("a"), ScriptedBackend("b")]))
    finally:
        telemetry.tracer = tracer
    [span] = [s for s in exporter.get_finished_spans() if s.name == "collective.model_call"]
    [event] = [e for e in span.events if e.name == "replica.fault"]
    assert event.attributes["server"] == "scripted:a"
    assert event.attributes["instead"] == "the call ran on scripted:b"
    assert trace.get_tracer_provider() is not provider  # the global provider was never touched


def test_the_output_notes_name_every_replica_lost_in_a_report_or_mid_answer() -> None:
    fault = {
        "server": "llama-server:http://a:1",
        "failed": "left out",
        "instead": "the call ran on b",
        "message": "replica llama-server:http://a:1 left out; the call ran on b",
    }
    final = {
        "answer": "ASA.",
        "notes": ["the question was cut"],
        "budgets": [{"node": "judge", "faults": [fault]}, {"node": "plan", "faults": []}],
    }
    mid = "specialist-1: replica llama-server:http://a:1 failed mid-answer; the call failed"
    out = _output(final, "t1", [mid])
    assert out["notes"] == ["the question was cut", mid, f"judge: {fault['message']}"]


def render(result: dict, quiet: bool) -> str:
    console = Console(file=io.StringIO(), width=300)
    render_result(console, result, thread_id=None, quiet=quiet)
    return console.file.getvalue()


def test_quiet_output_keeps_one_line_of_notes() -> None:
    result = {"answer": "ASA.", "notes": ["judge: replica [a] lost", "the question was cut"]}
    quiet = render(result, quiet=True)
    [line] = [line for line in quiet.splitlines() if line.startswith("notes:")]
    assert line == "notes: judge: replica [a] lost · the question was cut"  # markup stays text
    assert render({"answer": "ASA."}, quiet=True).count("notes") == 0


# -- 2. a cut question says which part was kept; long questions from stdin or a file -----------


def test_a_cut_keeps_the_beginning_and_the_end_and_says_which() -> None:
    pasted = "x" * 130_000
    text, [note] = check_question(f"Context: {pasted}\nWhich filament survives a hot car?")
    assert text.endswith("Which filament survives a hot car?")  # the question after the paste
    assert text.startswith("Context: xxx") and "question cut" in text
    assert len(text) < MAX_QUESTION_CHARS + 100
    assert "its first 4,000 and its last 4,000 were kept" in note
    assert "characters 4,001-126,044) left out" in note


def test_a_question_is_read_from_a_file_or_stdin_and_odd_files_are_refused(tmp_path) -> None:
    file = tmp_path / "q.txt"
    file.write_bytes("Which filament? \xff".encode() + b"\xff")
    assert read_question(file) == "Which filament? \xff\udcff"  # repaired later, with a note
    assert read_question("-", io.BytesIO(b"PETG or ASA?")) == "PETG or ASA?"
    with pytest.raises(InvalidQuestion, match="larger than 1 MiB"):
        read_question("-", io.BytesIO(b"x" * (2 << 20)))
    os.mkfifo(tmp_path / "pipe")
    for path, kind in [
        (tmp_path / "pipe", "a named pipe"),
        (Path("/dev/zero"), "a character device"),
        (tmp_path, "a directory"),
    ]:
        with pytest.raises(InvalidQuestion, match=f"question file {path} is {kind}"):
            read_question(path)


@pytest.mark.usefixtures("clean_cwd")
def test_ask_reads_the_question_from_a_file_or_stdin_before_anything_else(tmp_path) -> None:
    config = tmp_path / "dead.toml"
    config.write_text('planner = "llama-server:http://127.0.0.1:9"\n')
    (tmp_path / "q.txt").write_text("Which filament survives a hot car?")
    for args, stdin in [(["--question-file", "q.txt"], None), (["-"], "PETG or ASA?")]:
        status, _, err = run(["ask", *args, "--config", str(config), "--json"], input=stdin)
        assert status == 3, err  # the question was read; the dead server stopped the run
    status, _, err = run(["ask", "--question-file", "/dev/zero"])
    assert status == 2 and "is a character device, not a regular file" in one_error_line(err)
    status, _, err = run(["ask", "Q?", "--question-file", "q.txt"])
    assert status == 2 and "not both" in one_error_line(err)
    status, _, err = run(["ask", "-"], input=" \u200b\n")
    assert status == 2 and "the question is empty" in one_error_line(err)


# -- 3. a file of headings only is refused with its reason --------------------------------------


@pytest.mark.usefixtures("clean_cwd")
@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("# PETG dries at 65 °C for four hours\n", "holds only headings (1 lines starting"),
        ("".join(f"## heading {n}\n" for n in range(50_000)), "(50,000 lines starting with #)"),
        ("\n \n", "holds no text"),
    ],
)
def test_a_file_that_adds_nothing_is_refused_with_what_it_holds(tmp_path, text, why) -> None:
    (tmp_path / "notes.md").write_text(text, "utf-8")
    status, out, err = run(["kb", "add", "notes.md", "--kb", "kb.sqlite"])
    assert status == 1
    [line] = [line for line in err.splitlines() if line.startswith("refused ")]
    assert why in line and "nothing to add" in line
    assert "1 refused" in out


# -- 4. every database collective opens is checked for its kind before anything is written ------


def kb_database(path: Path) -> Path:
    source = REPO / "collective" / "data" / "demo_kb" / "petg.md"
    with SqliteKnowledgeStore(path, embedder=None) as store:
        store.add_file(source)
    return path


WRONG_KINDS = {
    "kb": [memory_database, checkpoint_database, other_database, look_alike_database],
    "checkpoints": [kb_database, memory_database, other_database],
    "store": [kb_database, checkpoint_database, other_database],
}
"""For each database a command opens, every kind of file it must refuse."""

COMMANDS = {
    "kb": [
        ["kb", "add", "notes.md", "--kb", "{db}"],
        ["kb", "list", "--kb", "{db}"],
        ["kb", "rm", "mem_0123456789abcdef", "--kb", "{db}"],
        ["kb", "reindex", "--kb", "{db}"],
        ["recall", "PETG", "--kb", "{db}"],
        ["ask", "PETG or ASA?", "--kb", "{db}"],
        ["chat", "--kb", "{db}"],
    ],
    "checkpoints": [
        ["ask", "PETG or ASA?", "--checkpoints", "{db}", "--config", "dead.toml"],
        ["threads", "prune", "--older-than", "1s", "--checkpoints", "{db}"],
        ["chat", "--config", "dead.toml", "--checkpoints-env", "{db}"],
    ],
    "store": [
        ["ask", "PETG or ASA?", "--config", "dead.toml", "--store-env", "{db}"],
        ["chat", "--config", "dead.toml", "--store-env", "{db}"],
    ],
}


def walk() -> list:
    return [
        pytest.param(kind, make, command, id=f"{' '.join(command[:2])}-{kind}-{make.__name__}")
        for kind, commands in COMMANDS.items()
        for command in commands
        for make in WRONG_KINDS[kind]
    ]


@pytest.mark.usefixtures("clean_cwd")
@pytest.mark.parametrize(("kind", "make", "command"), walk())
def test_every_command_refuses_a_database_of_the_wrong_kind_and_leaves_it_unchanged(
    tmp_path: Path, monkeypatch, kind, make, command
) -> None:
    (tmp_path / "notes.md").write_text("# PETG\n\nDry it at 65 °C.\n", "utf-8")
    (tmp_path / "dead.toml").write_text(  # a run that got past the guard would stop at preflight
        'planner = "llama-server:http://127.0.0.1:9"\njudge = "llama-server:http://127.0.0.1:9"\n'
    )
    folder = tmp_path / "db"
    folder.mkdir()
    database = make(folder / "data.sqlite")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    args = [a.replace("{db}", str(database)) for a in command]
    for option, variable in (("--checkpoints-env", "CHECKPOINTS"), ("--store-env", "STORE")):
        if option in args:  # chat has no option for these: its settings say them
            at = args.index(option)
            monkeypatch.setenv(f"COLLECTIVE_{variable}", args[at + 1])
            del args[at : at + 2]
    status, out, err = run(args, input="/exit\n")
    assert status == 2, (out, err)
    line = one_error_line(err)
    assert f"not a collective {'knowledge base' if kind == 'kb' else ''}" in line
    assert "left untouched" in line
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert after == before  # not a byte, not a new -wal or -shm file


def test_new_checkpoint_and_memory_databases_carry_their_mark(tmp_path) -> None:
    from collective.databases import CHECKPOINTS, STORE

    for make, kind in ((checkpoint_database, CHECKPOINTS), (memory_database, STORE)):
        path = make(tmp_path / f"{kind.name}.sqlite")
        with contextlib.closing(sqlite3.connect(path)) as db:
            assert db.execute("PRAGMA application_id").fetchone()[0] == kind.application_id


def test_databases_made_before_the_marks_are_still_recognised(tmp_path) -> None:
    from collective.databases import CHECKPOINTS, STORE, check_database

    for make, kind in ((checkpoint_database, CHECKPOINTS), (memory_database, STORE)):
        path = make(tmp_path / f"{kind.name}.sqlite")
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute("PRAGMA application_id = 0")  # what the code before the marks wrote
            db.commit()
        assert check_database(path, kind) is False  # an existing database of its kind


# -- 5. special and bottomless files are refused before they are read ---------------------------


@pytest.mark.usefixtures("clean_cwd")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["recall", "PETG", "--kb", "."], "is a directory, not a collective knowledge base"),
        (["recall", "PETG", "--kb", "/dev/null"], "is a character device, not a collective"),
        (["kb", "list", "--kb", "/dev/null"], "is a character device, not a collective"),
        (["recall", "PETG", "--kb", "pipe"], "is a named pipe (FIFO), not a collective"),
        (["kb", "add", "notes.md", "--kb", "pipe"], "is a named pipe (FIFO), not a collective"),
        (["ask", "PETG?", "--kb", "pipe"], "is a named pipe (FIFO), not a collective"),
        (["ask", "PETG?", "--config", "/dev/zero"], "config file /dev/zero is a character"),
        (["ask", "PETG?", "--config", "pipe"], "config file pipe is a named pipe (FIFO)"),
        (["config", "show", "--config", "/dev/zero"], "is a character device, not a regular"),
        (["ask", "PETG?", "--config", "huge.toml"], "larger than 1 MiB, the most accepted"),
        (["eval", "pipe"], "question file pipe is a named pipe (FIFO), not a regular file"),
        (["eval", "/dev/zero"], "question file /dev/zero is a character device, not a regular"),
        (["eval", "q.jsonl", "--out", "pipe"], "results file pipe is a named pipe (FIFO), not"),
        (["eval", "q.jsonl", "--out", "/dev/zero"], "results file /dev/zero is a character dev"),
        (["eval", "q.jsonl", "--out", "."], "is a directory"),
    ],
)
def test_special_and_bottomless_files_are_refused_at_once(tmp_path, args, message) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "notes.md").write_text("# PETG\n\nDry it at 65 °C.\n", "utf-8")
    (tmp_path / "huge.toml").write_text("# comment\n" * 200_000)
    (tmp_path / "q.jsonl").write_text('{"question": "PETG dries at?", "numbers": [65]}\n')
    done = subprocess.run(  # a process of its own: a hang is a timeout, not a stuck test run
        [sys.executable, "-m", "collective.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert message in one_error_line(done.stderr)


def test_a_kb_file_over_the_bound_is_refused_before_it_is_read(tmp_path) -> None:
    from collective.kb import sqlite_ingest

    big = tmp_path / "big.md"
    big.write_text("word " * 300)
    with SqliteKnowledgeStore(tmp_path / "kb.sqlite", embedder=None) as store:
        sqlite_ingest.MAX_FILE_BYTES, before = 1000, sqlite_ingest.MAX_FILE_BYTES
        try:
            with pytest.raises(ConfigError, match="larger than 1,000 bytes"):
                store.add_file(big)
        finally:
            sqlite_ingest.MAX_FILE_BYTES = before


@pytest.mark.usefixtures("clean_cwd")
def test_a_kb_that_cannot_be_created_says_why(tmp_path) -> None:
    place = Path("/sys/collective-kb.sqlite")  # sysfs: no new files, whoever runs the test
    try:
        os.close(os.open(place, os.O_WRONLY | os.O_CREAT))
    except OSError:
        pass
    else:
        place.unlink()
        pytest.skip("/sys takes new files here")
    (tmp_path / "notes.md").write_text("# PETG\n\nDry it.\n")
    status, _, err = run(["kb", "add", "notes.md", "--kb", str(place)])
    line = one_error_line(err)
    assert status == 2 and f"cannot write {place} (" in line and "for a new knowledge base" in line
    assert "Permission denied" in line or "Read-only file system" in line  # the real cause
    assert not place.exists()


# -- 6. the OpenAI client's base URL with /v1 ----------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "base"),
    [
        ("openai:qwen@http://10.0.0.9:8000/v1", "http://10.0.0.9:8000"),
        ("openai:qwen@http://10.0.0.9:8000/v1/", "http://10.0.0.9:8000"),
        ("openai:qwen@http://h:8000/v1?n_ctx=8192", "http://h:8000"),
        ("openai:qwen@http://h:8000/proxy/v1", "http://h:8000/proxy"),
        ("llama-server:http://h:8083/v1", "http://h:8083"),
    ],
)
def test_a_v1_suffix_is_the_servers_base_url(spec, base) -> None:
    assert check_spec(spec) == spec
    backend = backend_from_spec(spec)
    assert backend.base_url == base
    assert "/v1" not in backend.spec.split("@")[-1]
