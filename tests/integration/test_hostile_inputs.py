"""One huge file must not take the council down (issue 28, item 1), on the real backends.

A 20 MB one-paragraph text file goes through the real `collective kb add`; councils then run
through the real `collective ask` on the real llama-server and in process (gemma), on that KB
and on a KB that holds the same file as ONE 20 MB chunk (what `kb add` stored before chunks
were bounded: existing KBs may still hold one). Small plans, k = 1 and tiny answer caps keep
each council to seconds.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from collective.kb.chunking import MAX_CHUNK_CHARS
from collective.kb.demo import demo_kb_path
from collective.kb.sqlite_store import SqliteKnowledgeStore
from tests.cli import run

pytestmark = pytest.mark.integration

KEEP_ENV = ("COLLECTIVE_CACHE", "COLLECTIVE_EMBEDDED_MODEL")
SIZE = 20_000_000
QUESTION = "Which filament for a hot car, PETG or ASA?"
DEMO_KB = demo_kb_path()
# Small explicit plans: the huge chunk fills the KB section, whatever the model's context.
SETTINGS = """
k = 1
retrieval = "lean"
judge_tools = false
"""
PLANS = """
[output_caps]
planner = 16
specialist = 24
judge = 24
[budgets.planner]
n_ctx = 2048
output = 32
sections = { system = 200, kb_chunks = 300, task = 150, safety_margin = 50 }
[budgets.specialist]
n_ctx = 2048
output = 32
sections = { system = 200, kb_chunks = 300, task = 200, safety_margin = 50 }
[budgets.judge]
n_ctx = 2048
output = 32
[budgets.judge.sections]
system = 200
kb_chunks = 300
proposals = 150
evidence = 150
task = 150
safety_margin = 50
"""


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 MB of words in one paragraph: no blank line, no sentence end, no heading."""
    words = "PETG ASA filament hot car warps softens sunlight dashboard heat enclosure bed nozzle"
    rng = random.Random(28)
    vocabulary = words.split() + ["the", "and", "of", "in", "at", "degrees"]
    text = " ".join(rng.choice(vocabulary) for _ in range(SIZE // 5))[:SIZE]
    path = tmp_path_factory.mktemp("big") / "big.txt"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def kbs(big_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`added`: the file through the real `collective kb add`; `old`: one 20 MB chunk.

    Lexical only (`COLLECTIVE_KB_EMBEDDINGS=none`): embedding 16,700 chunks is another test's
    cost, not this one's.
    """
    folder = tmp_path_factory.mktemp("kbs")
    added = folder / "added.sqlite"
    lexical = {"COLLECTIVE_KB_EMBEDDINGS": "none"}
    status, out, err = run(["kb", "add", str(big_file), "--kb", str(added)], env=lexical)
    assert status == 0, err
    old = folder / "old.sqlite"
    with SqliteKnowledgeStore(old, embedder=None) as store:
        store.add_paths([DEMO_KB], base=DEMO_KB.parent)  # an old KB's other, ordinary chunks
        store._db.execute(
            "INSERT INTO chunks(id, source, heading, text, tags, position) VALUES (?,?,?,?,?,?)",
            ("mem_00000000000020mb", str(big_file), "", big_file.read_text("utf-8"), "", 0),
        )
        store._db.commit()
    return {"added": added, "old": old}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name not in KEEP_ENV:
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_kb_add_of_a_20_mb_paragraph_makes_chunks_of_bounded_size(kbs: dict[str, Path]) -> None:
    status, out, err = run(["kb", "list", "--kb", str(kbs["added"]), "--json"])
    assert status == 0, err
    chunks = json.loads(out)["chunks"]
    assert len(chunks) >= SIZE // MAX_CHUNK_CHARS
    assert max(c["chars"] for c in chunks) <= MAX_CHUNK_CHARS
    assert sum(c["chars"] for c in chunks) >= SIZE * 0.99  # only spaces at the cuts are gone


def ask(workdir: Path, backends: str, kb: Path) -> dict:
    (workdir / "collective.toml").write_text(SETTINGS + backends + PLANS)
    status, out, err = run(["ask", QUESTION, "--kb", str(kb), "--json"])
    assert status == 0, err + out
    result = json.loads(out)
    assert result["answer"] and not result["proposals"][0]["error"]
    for budget in result["budgets"]:
        assert budget["prompt_tokens"] + budget["max_output_tokens"] <= budget["n_ctx"]
        for section in budget["sections"]:
            assert section["used"] <= (section.get("granted") or section["allocated"])
    kb_used = [
        s["used"] for b in result["budgets"] for s in b["sections"] if s["name"] == "kb_chunks"
    ]
    assert all(kb_used)  # every prompt showed KB text
    return result


def check_old_kb_note(result: dict, kb: str) -> None:
    notes = " ".join(result["notes"])
    if kb == "old":  # the huge chunk was shown (in part); the user is told how to fix the KB
        assert "mem_00000000000020mb" in result["retrieval"]["injected"]
        assert "holds 20,000,000 characters" in notes and "collective kb add" in notes
        assert {c["id"] for c in result["citations"]} <= set(result["retrieval"]["injected"])
    else:
        assert "characters" not in notes


@pytest.mark.parametrize("kb", ["added", "old"])
def test_a_council_on_llama_server_works_on_a_kb_with_a_20_mb_file(
    workdir: Path, llama_server, kbs: dict[str, Path], kb: str
) -> None:
    url = f"llama-server:{llama_server.url}"
    backends = f'planner = "{url}"\njudge = "{url}"\n[[specialists]]\nbackend = "{url}"\n'
    result = ask(workdir, backends, kbs[kb])
    assert {b["token_counter"] for b in result["budgets"]} == {"exact:llama-server"}
    check_old_kb_note(result, kb)


@pytest.mark.parametrize("kb", ["added", "old"])
def test_a_council_in_process_works_on_a_kb_with_a_20_mb_file(
    workdir: Path, gguf_path: Path, kbs: dict[str, Path], kb: str
) -> None:
    backends = 'planner = "embedded"\njudge = "embedded"\n'
    result = ask(workdir, backends, kbs[kb])
    assert {b["token_counter"] for b in result["budgets"]} == {"exact:llama.cpp"}
    check_old_kb_note(result, kb)
