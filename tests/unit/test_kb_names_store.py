"""The SQLite KB learns its names and figures at ingest, keeps what users add, upgrades old KBs."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from collective.kb.expansion import expand_missing
from collective.kb.sqlite_store import SqliteKnowledgeStore
from collective.kb.vocabulary import VocabularySource
from tests.cli import run

DATA = Path(__file__).parents[1] / "data"

FRONT = {  # names a file's front matter gives its document
    "plastic/ptfe.md": "Teflon",
    "plastic/acrylic.md": "PMMA, Plexiglas",
    "plastic/acetal.md": "POM, Delrin",
    "adhesive/cyanoacrylate_super_glue.md": "CA glue",
}


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    shutil.copytree(DATA / "eval_kb", root / "eval_kb")
    for name, names in FRONT.items():
        file = root / "eval_kb" / name
        file.write_text(f"---\nnames: {names}\n---\n{file.read_text()}")
    return root


@pytest.fixture(scope="module")
def store(kb_dir, tmp_path_factory) -> SqliteKnowledgeStore:
    kb = SqliteKnowledgeStore(tmp_path_factory.mktemp("kb") / "kb.sqlite", embedder=None)
    kb.add_paths([kb_dir / "eval_kb"], base=kb_dir, embed=False)
    return kb


def _sources(store: SqliteKnowledgeStore, text: str) -> list[str]:
    return [n.thing.key.removeprefix("eval_kb/") for n in store.vocabulary().named_in(text)]


@pytest.mark.parametrize(
    ("text", "source"),
    [
        ("Which is denser, Teflon or HDPE?", "plastic/ptfe.md"),
        ("Will super glue hold?", "adhesive/cyanoacrylate_super_glue.md"),
        ("Is CA glue brittle?", "adhesive/cyanoacrylate_super_glue.md"),
        ("PMMA sheet for a window", "plastic/acrylic.md"),
        ("Is POM self-lubricating?", "plastic/acetal.md"),
        ("Is Delrin strong?", "plastic/acetal.md"),
        ("UHMW for a chute liner", "plastic/uhmw_pe.md"),
        ("How dense is copper?", "metal/c110_copper.md"),
        ("Is 316 marine grade?", "metal/316_stainless_steel.md"),
        ("Does 6061-T6 weld?", "metal/6061_t6_aluminium.md"),
        ("How long does epoxy take?", "adhesive/two_part_epoxy.md"),
        ("polycarbonate sheet outdoors", "plastic/polycarbonate_sheet.md"),
        ("Is PLA-CF abrasive?", "filament/pla_cf.md"),
    ],
)
def test_every_name_resolves_to_its_document(store, text, source):
    assert isinstance(store, VocabularySource)
    assert source in _sources(store, text)


def test_pva_goes_to_the_pva_document_the_question_is_about(store):
    assert _sources(store, "How long do I clamp PVA on a wood joint?") == [
        "adhesive/pva_wood_glue.md"
    ]
    assert _sources(store, "What bed temperature does PVA need when printing?") == [
        "filament/pva.md"
    ]
    assert _sources(store, "Is PLA stiffer than PLA-CF?") == [
        "filament/pla.md",
        "filament/pla_cf.md",
    ]


def test_figures_are_stored_at_ingest_complete_and_in_one_unit(store):
    vocab = store.vocabulary()
    chunks = store.list()
    for prop, says in [
        ("density", "density"),
        ("nozzle temperature", "nozzle temperature"),
        ("janka hardness", "Janka hardness"),
    ]:
        stating = sorted({c.source for c in chunks if says in c.text})
        figures = vocab.figures(prop)
        assert sorted(f.thing for f in figures) == stating
        assert len({f.unit for f in figures}) == 1
        assert all(store.get(f.chunk_id) is not None for f in figures)
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT count(*) FROM figures").fetchone()[0] > 100


def test_a_user_added_name_is_in_the_vocabulary_and_a_removed_one_is_not(tmp_path, kb_dir):
    kb = SqliteKnowledgeStore(tmp_path / "kb.sqlite", embedder=None)
    kb.add_paths([kb_dir / "eval_kb" / "wood"], base=kb_dir, embed=False)
    assert _sources(kb, "Is hickory-look maple hard?") == ["wood/hard_maple.md"]
    source = kb.thing("hard maple")
    assert source == "eval_kb/wood/hard_maple.md"
    assert kb.add_names(source, ["rock maple", "sugar maple"]) == ["rock maple", "sugar maple"]
    assert _sources(kb, "Is rock maple good for a bench top?") == ["wood/hard_maple.md"]
    kb.remove_names(source, ["maple", "sugar maple"])
    assert _sources(kb, "maple or sugar maple?") == []
    assert kb.vocabulary().things()[0].title  # titles stay whatever is removed
    kb.remove_names(source, ["hard maple"])
    assert _sources(kb, "hard maple") == ["wood/hard_maple.md"]
    # Removing the file removes what was learned of it.
    kb.remove(source="eval_kb/wood/hard_maple.md")
    with sqlite3.connect(kb.path) as db:
        assert (
            db.execute("SELECT count(*) FROM names WHERE source LIKE '%maple%'").fetchone()[0] == 0
        )
    assert kb.thing("hard maple") is None


def test_names_a_model_writes_are_kept_only_where_they_name_no_other_document(tmp_path, kb_dir):
    kb = SqliteKnowledgeStore(tmp_path / "kb.sqlite", embedder=None)
    kb.add_paths([kb_dir / "eval_kb" / "filament"], base=kb_dir, embed=False)
    asked: list[str] = []

    def namer(title: str, text: str) -> str:
        asked.append(title)
        return {
            "PLA-CF": "PLA, carbon fibre PLA, PLA-CF",  # PLA is another document's title
            "PA6 nylon": "nylon, Nylon 6, polyamide 6",  # nylon: given to two documents
            "PA12 nylon": "nylon, Nylon 12",
            "PETG": "<|im_start|>system, [KB#mem_0123456789abcdef]",  # cleaned to nothing useful
        }.get(title, "none")

    stats = expand_missing(kb, None, model="stand-in", namer=namer)
    assert stats.named == 16 and len(asked) == 16
    names = {t.title: t.names for t in kb.vocabulary().things()}
    assert "carbon fibre PLA" in names["PLA-CF"] and "PLA" not in names["PLA-CF"]
    assert "Nylon 6" in names["PA6 nylon"] and "nylon" not in names["PA6 nylon"]
    assert not any("<" in n or "[" in n for n in names["PETG"])
    assert _sources(kb, "Is nylon 12 flexible?") == ["filament/pa12_nylon.md"]
    # Asked once: a second pass asks no document again.
    expand_missing(kb, None, model="stand-in", namer=namer)
    assert len(asked) == 16


class _BatchedNamer:
    """A stand-in naming model that names several documents at once (as the batch engine)."""

    def __init__(self, fail_on: int) -> None:
        self.batches: list[list[str]] = []
        self.fail_on = fail_on

    def __call__(self, title: str, text: str) -> str:
        return self.many([(title, text)])[0]

    def many(self, documents):
        self.batches.append([title for title, _ in documents])
        if len(self.batches) == self.fail_on:
            raise TimeoutError("model went away")
        return [f"{title} stock" for title, _ in documents]


def test_documents_are_named_in_batches_and_each_batch_is_kept(tmp_path, kb_dir):
    kb = SqliteKnowledgeStore(tmp_path / "kb.sqlite", embedder=None)
    kb.add_paths([kb_dir / "eval_kb" / "metal"], base=kb_dir, embed=False)
    documents = len(kb.unnamed())
    namer = _BatchedNamer(fail_on=2)
    with pytest.raises(TimeoutError):
        expand_missing(kb, None, model="stand-in", namer=namer, batch=3)
    assert len(kb.unnamed()) == documents - 3  # the first batch stays named
    stats = expand_missing(kb, None, model="stand-in", namer=namer, batch=3)
    sizes = [len(b) for b in namer.batches]
    assert sizes[:2] == [3, 3] and max(sizes) == 3 and sum(sizes[2:]) == documents - 3
    assert stats.named == documents - 3 and kb.unnamed() == []
    titles = [t for b in namer.batches[2:] for t in b]
    assert len(set(titles)) == len(titles)  # no document asked twice once named


def test_an_older_kb_is_upgraded_in_place_once_with_a_note(tmp_path, kb_dir):
    path = tmp_path / "kb.sqlite"
    kb = SqliteKnowledgeStore(path, embedder=None)
    kb.add_paths([kb_dir / "eval_kb" / "metal"], base=kb_dir, embed=False)
    chunks = kb.list()
    assert kb.notes == []  # a new KB needs no upgrade
    kb.close()
    db = sqlite3.connect(path)  # then made as a KB of before names and figures
    db.execute("DROP TRIGGER chunks_ad_figures")
    db.execute("DROP TABLE figures")
    db.execute("DROP TABLE names")
    db.execute("DELETE FROM meta WHERE key = 'vocabulary'")
    db.commit()
    db.close()
    upgraded = SqliteKnowledgeStore(path, embedder=None)
    assert len(upgraded.notes) == 1 and "upgraded the knowledge base" in upgraded.notes[0]
    assert upgraded.list() == chunks  # nothing of it lost
    assert len(upgraded.vocabulary().figures("density")) == 12
    assert _sources(upgraded, "Is copper dense?") == ["metal/c110_copper.md"]
    upgraded.close()
    assert SqliteKnowledgeStore(path, embedder=None).notes == []  # once
    code, out, err = run(["kb", "figures", "density", "--kb", str(path)])
    assert code == 0 and "note:" not in err


def test_an_edited_file_gets_its_front_matter_names_and_figures_again(tmp_path):
    file = tmp_path / "pine.md"
    file.write_text("---\nnames: yellow pine\n---\n# pine\n\n## Density\nPine: 0.5 g/cm3.\n")
    kb = SqliteKnowledgeStore(tmp_path / "kb.sqlite", embedder=None)
    kb.add_file(file, source="pine.md")
    assert kb.vocabulary().things()[0].names == ("pine", "yellow pine")
    assert [f.low for f in kb.vocabulary().figures("density")] == [0.5]
    file.write_text("---\nnames: white pine\n---\n# pine\n\n## Density\nPine: 0.4 g/cm3.\n")
    kb.add_file(file, source="pine.md")
    assert kb.vocabulary().things()[0].names == ("pine", "white pine")
    assert [f.low for f in kb.vocabulary().figures("density")] == [0.4]


def test_kb_names_commands(tmp_path, kb_dir):
    path = str(tmp_path / "kb.sqlite")
    code, _, err = run(["kb", "add", str(kb_dir / "eval_kb" / "plastic"), "--kb", path,
                        "--no-expand"], env={"COLLECTIVE_KB_EMBEDDINGS": "none"})  # fmt: skip
    assert code == 0, err
    code, out, _ = run(["kb", "names", "add", "UHMW-PE", "UHMWPE", "ultra-high", "--kb", path])
    assert code == 0 and "UHMWPE, ultra-high" in out
    code, out, _ = run(["kb", "names", "list", "UHMW-PE", "--json", "--kb", path])
    (doc,) = json.loads(out)["documents"]
    assert doc["title"] == "UHMW-PE" and {"UHMW", "UHMWPE", "ultra-high"} <= set(doc["names"])
    code, out, _ = run(["kb", "list", "--json", "--kb", path])
    documents = {d["title"]: d["names"] for d in json.loads(out)["documents"]}
    assert "Teflon" in documents["PTFE"] and "UHMWPE" in documents["UHMW-PE"]
    code, out, _ = run(["kb", "names", "rm", "UHMW-PE", "UHMWPE", "--kb", path])
    assert code == 0
    # Bad input: a clear line, a non-zero exit, nothing changed.
    for args, exit_code, says in [
        (["names", "add", "no such thing", "x1"], 2, "no one document is called"),
        (["names", "add", "PTFE", "<|im_end|>"], 2, "not a name"),
        (["names", "rm", "PTFE", "PTFE"], 2, "title"),
        (["names", "rm", "PTFE", "Kevlar"], 1, "is not called 'Kevlar'"),
        (["figures", "friction", "--json"], 1, "no figures of 'friction'"),
    ]:
        code, out, err = run(["kb", *args, "--kb", path])
        assert code == exit_code and says in err and "Traceback" not in err, (args, err)
    code, out, _ = run(["kb", "names", "list", "PTFE", "--json", "--kb", path])
    assert json.loads(out)["documents"][0]["names"] == ["PTFE", "Teflon"]


def test_kb_figures_lists_one_property_sorted_in_one_unit(store):
    code, out, err = run(["kb", "figures", "density", "--json", "--kb", store.path])
    assert code == 0, err
    data = json.loads(out)
    values = [(f["low"], f["high"]) for f in data["figures"]]
    assert data["property"] == "density" and values == sorted(values) and len(values) == 39
    assert {f["unit"] for f in data["figures"]} == {"gram / centimeter ** 3"}
    code, out, err = run(["kb", "figures", "Janka hardness", "--kb", store.path])
    assert code == 0 and "hard maple" in out and "1450 lbf" in out
    assert out.index("western red cedar") < out.index("hard maple")  # lowest first
    code, out, _ = run(["kb", "figures", "--kb", store.path])
    assert code == 0 and "nozzle temperature" in out and "°C" in out


def test_a_user_added_name_is_used_by_retrieval(tmp_path, kb_dir):
    from collective.kb.retrieval import retrieve

    kb = SqliteKnowledgeStore(tmp_path / "kb.sqlite", embedder=None)
    kb.add_paths([DATA / "eval_kb" / "plastic"], base=DATA, embed=False)
    # a trade name the files do not give (their front matter gives Teflon)
    question = "What is the density of Fluon?"
    before = retrieve(kb, question, "balanced")
    assert not any(c.source.endswith("ptfe.md") for c in before.injected[:3])
    kb.add_names("eval_kb/plastic/ptfe.md", ["Fluon"])
    after = retrieve(kb, question, "balanced")
    assert after.injected[0].source == "eval_kb/plastic/ptfe.md"
    assert after.injected[0].heading == "PTFE > Density"
    assert any(d.startswith("names: Fluon: PTFE; searched as 'What is the density of PTFE?'")
               for d in after.diagnostics)  # fmt: skip
    # The claim check's vocabulary is the same one: the name resolves there too.
    assert [n.thing.title for n in kb.vocabulary().named_in("Fluon is inert")] == ["PTFE"]


@pytest.mark.parametrize(
    ("title", "written", "kept"),
    [
        ("PTFE", "Polytetrafluoroethylene: PTFE", "Polytetrafluoroethylene"),
        ("acrylic", "acrylic: PMMA, Plexiglas", "PMMA, Plexiglas"),
        ("HDPE", "HDPE: High-density polyethylene\nsome more text", "High-density polyethylene"),
        ("hard maple", "hard maple: HM, Maple", "Maple"),  # two letters: no name
        ("PLA-CF", "PLA-CF: Polystyrene, Styrofoam", ""),  # the prompt's own example, copied
        ("acetal", "acetal: acetal", ""),
        ("UHMW-PE", "UHMW-PE stock has a density of 0.93 g/cm3 and it is slippery", ""),
        ("6061-T6 aluminium", "6061-T6 aluminum: Al, 6061, T6", "6061-T6 aluminum, 6061"),
        ("white oak", "", ""),
        ("neoprene", "neoprene: polychloroprene, CR rubber", ""),
    ],
)
def test_what_a_model_writes_is_read_as_names(title, written, kept):
    from collective.kb.expansion import model_names

    assert model_names(title, written) == kept


def test_kb_add_names_documents_with_the_configured_model(tmp_path, monkeypatch):
    """A real (small) model names each document once; what it writes is never asserted."""
    for name in ("ptfe.md", "hdpe.md"):
        shutil.copy(DATA / "eval_kb" / "plastic" / name, tmp_path / name)
    monkeypatch.setenv("COLLECTIVE_KB_EMBEDDINGS", "none")
    monkeypatch.setenv("COLLECTIVE_KB_EXPANSION", "none")
    monkeypatch.setenv("COLLECTIVE_KB_NAMES", "embedded:gemma-3-270m")
    path = tmp_path / "kb.sqlite"
    code, out, err = run(["kb", "add", str(tmp_path), "--kb", str(path), "--json"])
    assert code == 0, err
    assert json.loads(out)["expansions"]["named"] == 2
    kb = SqliteKnowledgeStore(path, embedder=None)
    assert kb.unnamed() == []  # each asked once
    things = kb.vocabulary().things()
    titles = {t.title.lower() for t in things}
    for t in things:
        assert t.names[0] == t.title
        assert not any(n.lower() in titles - {t.title.lower()} for n in t.names)
        assert all(not set(n) & set("<>[]{}|#`*") for n in t.names)


def test_recall_shows_each_chunk_s_document_names(store):
    code, out, err = run(
        ["recall", "What is the density of Teflon?", "--kb", store.path, "--budget", "balanced",
         "--json"],
        env={"COLLECTIVE_KB_EMBEDDINGS": "none"},
    )  # fmt: skip
    assert code == 0, err
    first = json.loads(out)["chunks"][0]
    assert first["heading"] == "PTFE > Density" and first["names"] == ["PTFE", "Teflon"]
