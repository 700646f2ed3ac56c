"""Dense and hybrid KB retrieval with the bundled embedding model (issue 26)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from collective.commands import kb as kb_command
from collective.commands import recall as recall_command
from collective.errors import ConfigError
from collective.kb.embeddings import BUILTIN_MODEL, MiniLMEmbedder, embedder_for
from collective.kb.retrieval import retrieve
from collective.kb.sqlite_store import SqliteKnowledgeStore
from tests.fakes import HashingEmbedder

app = typer.Typer()
app.add_typer(kb_command.app, name="kb")
app.command()(recall_command.recall)
runner = CliRunner()

CEDAR = (
    "# western red cedar\n\n## Finishing\nWeathers to silver grey unless finished; tannins can "
    "stain iron fasteners.\n\n## Typical uses\nUsed for siding, fences, decks and outdoor "
    "furniture.\n"
)
GLUE = (
    "# PVA wood glue\n\n## Strength\nStronger than the wood itself in a good joint.\n\n"
    "## Gap filling\nPoor; needs tight-fitting joints.\n"
)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "cedar.md").write_text(CEDAR, encoding="utf-8")
    (folder / "glue.md").write_text(GLUE, encoding="utf-8")
    return folder


def test_tokenizer_matches_bert_uncased_wordpiece() -> None:
    # Ids pinned from the hand-written WordPiece this replaced (equal on all 575 paragraphs of
    # the eval and demo KBs); the long text is cut at 256 ids, [SEP] last.
    text = "Café naïve 60°C ×2 — “quotes” under_score e-mail $5 C++ 3.5mm (PETG) résumé 日本語"
    expected = [101, 7668, 15743, 3438, 7737, 2278, 1095, 2475, 1517, 1523, 16614, 1524, 2104]
    expected += [1035, 3556, 1041, 1011, 5653, 1002, 1019, 1039, 1009, 1009, 1017, 1012, 1019]
    expected += [7382, 1006, 9004, 2290, 1007, 13746, 1864, 1876, 1950, 102]
    tokenizer = MiniLMEmbedder().tokenizer
    assert tokenizer.encode(text).ids == expected
    long = tokenizer.encode(" ".join(["word"] * 300)).ids
    assert len(long) == 256 and long[0] == 101 and long[-1] == 102


def test_the_bundled_model_ranks_paraphrases_by_meaning() -> None:
    model = embedder_for("builtin")
    assert model is not None and model.name == BUILTIN_MODEL
    vectors = model.embed(
        ["black streaks from the nails on my fence", "tannins stain iron fasteners", "PLA prints"]
    )
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.1


def test_the_encoder_runs_in_float32_throughout(monkeypatch: pytest.MonkeyPatch) -> None:
    # A numpy float64 scalar in a formula turned every layer after the first into float64
    # (2.7x the CPU time at ingest); each layer norm must see float32 activations.
    from collective.kb import embeddings

    seen: list[np.dtype] = []
    real = embeddings._layer_norm

    def spy(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
        seen.append(x.dtype)
        return real(x, weight, bias)

    monkeypatch.setattr(embeddings, "_layer_norm", spy)
    embeddings.MiniLMEmbedder().embed(["tannins stain iron fasteners", "PLA prints"])
    assert len(seen) == 13 and set(seen) == {np.dtype(np.float32)}


def test_gelu_is_the_exact_erf_gelu() -> None:
    import math

    from collective.kb.embeddings import _gelu

    x = np.linspace(-6, 6, 241, dtype=np.float32)
    expected = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.tolist()]
    got = _gelu(x.copy())
    assert got.dtype == np.float32
    assert np.allclose(got, expected, atol=2e-6)


def test_hybrid_finds_what_no_query_word_matches(tmp_path: Path, docs: Path) -> None:
    with SqliteKnowledgeStore(tmp_path / "kb.sqlite") as store:
        store.add_paths([docs])
        result = retrieve(store, "why is the wood near my screws turning dark", "balanced")
    finishing = next(c for c in result.injected if c.heading.endswith("Finishing"))
    side = result.sides[finishing.id]
    assert side["dense_rank"] == 1 and side["lexical_rank"] is None
    assert result.to_dict()["dense"]["used"] is True
    assert any("hybrid (convex)" in d for d in result.diagnostics)


def test_kb_of_another_model_is_refused_until_reindex(tmp_path: Path, docs: Path) -> None:
    kb = tmp_path / "kb.sqlite"
    with SqliteKnowledgeStore(kb, embedder=HashingEmbedder()) as store:
        store.add_paths([docs / "cedar.md"])
        assert store.vector_status() == ("hashing-16", 2, 2)

    refused = runner.invoke(app, ["recall", "fence stains", "--kb", str(kb)])
    assert refused.exit_code == 2
    message = refused.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in refused.output
    assert "'hashing-16'" in message and f"'{BUILTIN_MODEL}'" in message
    assert "collective kb reindex" in message
    added = runner.invoke(app, ["kb", "add", str(docs / "glue.md"), "--kb", str(kb)])
    assert added.exit_code == 2 and "kb reindex" in added.stderr
    with SqliteKnowledgeStore(kb, embedder=None) as store:
        assert store.count() == 2  # nothing was added to a KB it could not embed

    fixed = runner.invoke(app, ["kb", "reindex", "--kb", str(kb), "--json"])
    assert fixed.exit_code == 0, fixed.output
    assert json.loads(fixed.stdout) == {"kb": str(kb), "model": BUILTIN_MODEL, "vectors": 2}
    answered = runner.invoke(app, ["recall", "fence stains", "--kb", str(kb), "--json"])
    assert answered.exit_code == 0 and json.loads(answered.stdout)["dense"]["used"] is True


def test_kb_add_with_one_bad_file_keeps_the_others_vectors(tmp_path: Path, docs: Path) -> None:
    (docs / "broken.md").write_bytes(b"\xff\xfe not utf-8 \xc3")
    kb = tmp_path / "kb.sqlite"
    result = runner.invoke(app, ["kb", "add", str(docs), "--kb", str(kb), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [Path(r["path"]).name for r in data["refused"]] == ["broken.md"]
    assert data["added"] == 4 and data["vectors_added"] == 4
    with SqliteKnowledgeStore(kb) as store:
        assert store.vector_status() == (BUILTIN_MODEL, 4, 4)


def test_kb_without_vectors_still_answers_and_says_how_to_add_them(
    tmp_path: Path, docs: Path
) -> None:
    kb = tmp_path / "kb.sqlite"
    with SqliteKnowledgeStore(kb, embedder=None) as store:  # a KB from before vectors
        store.add_paths([docs])
        assert store.vector_status() == (None, 0, 4)
    result = runner.invoke(app, ["recall", "PVA glue gap filling", "--kb", str(kb), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["injected"] and data["dense"]["used"] is False
    assert any("no vectors" in d and "collective kb reindex" in d for d in data["diagnostics"])


def test_deep_recall_on_a_kb_without_vectors_shows_the_reranked_chunks(
    tmp_path: Path, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Deep's reranker noted its score on chunks the hybrid had said nothing of (no dense
    # side): printing them failed with an internal error (KeyError 'lexical_rank').
    monkeypatch.setenv("COLLECTIVE_RERANK", "embedded")  # the tests' gemma: real, and fast
    kb = tmp_path / "kb.sqlite"
    with SqliteKnowledgeStore(kb, embedder=None) as store:
        store.add_paths([docs])
    result = runner.invoke(
        app, ["recall", "PVA glue gap filling", "--kb", str(kb), "--retrieval", "deep"]
    )
    assert result.exit_code == 0, result.output
    assert "reranker " in result.output and "internal error" not in result.output


def test_embedding_spec_errors_are_config_errors() -> None:
    assert embedder_for("none") is None
    with pytest.raises(ConfigError, match="openai:URL#MODEL"):
        embedder_for("word2vec")


def test_embedding_server_specs_take_the_chat_backends_form() -> None:
    from collective.kb.embeddings import EmbeddingSpec, parse_spec

    assert parse_spec("openai:nomic@http://127.0.0.1:8085") == EmbeddingSpec(
        "openai", "http://127.0.0.1:8085/v1/embeddings", "nomic"
    )
    assert parse_spec("openai:nomic@http://h:8085/v1/") == parse_spec("openai:nomic@http://h:8085")
    # The first form stays an alias: the endpoint's full URL, then the model.
    assert parse_spec("openai:http://h:8085/v1/embeddings#nomic") == parse_spec(
        "openai:nomic@http://h:8085"
    )
    assert parse_spec("ollama:nomic@http://h:11434/") == EmbeddingSpec(
        "ollama", "http://h:11434/api/embed", "nomic"
    )
    for bad in ("openai:nomic@http://h:0", "openai:nomic@http://h:70000", "ollama:m@http://h:x"):
        with pytest.raises(ConfigError, match="give one from 1 to 65535"):
            parse_spec(bad)
    with pytest.raises(ConfigError, match="no model name"):
        parse_spec("openai:@http://h:8085")


def test_config_file_names_the_kb_embedder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collective.config import load_config

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COLLECTIVE_KB_EMBEDDINGS", raising=False)
    monkeypatch.delenv("COLLECTIVE_CONFIG", raising=False)
    assert load_config(dotenv=None).config.kb_embeddings == "builtin"
    (tmp_path / "collective.toml").write_text('kb_embeddings = "none"\n', encoding="utf-8")
    effective = load_config(dotenv=None)
    assert effective.config.kb_embeddings == "none"
    assert effective.source_of("kb_embeddings") == "file"
    assert effective.config.council_context().kb_embeddings == "none"  # what the run opens
    monkeypatch.setenv("COLLECTIVE_KB_EMBEDDINGS", "builtin")  # the environment wins
    assert load_config(dotenv=None).config.kb_embeddings == "builtin"
    monkeypatch.delenv("COLLECTIVE_KB_EMBEDDINGS")

    bad = tmp_path / "bad.toml"
    bad.write_text('kb_embeddings = "openai:m@http://127.0.0.1:99999"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="kb_embeddings: .*give one from 1 to 65535"):
        load_config(bad, dotenv=None)


def test_kb_commands_use_the_config_files_embedder_read_by_the_settings_alone(
    tmp_path: Path, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # kb/embeddings.py read `kb_embeddings` from the file itself, beside collective.config.
    import sys
    import tomllib

    parsed_by: list[str] = []
    loads = tomllib.loads

    def spy(text: str, **kwargs: object) -> dict:
        if "kb_embeddings" in text:
            parsed_by.append(sys._getframe(1).f_globals["__name__"])
        return loads(text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tomllib, "loads", spy)
    monkeypatch.delenv("COLLECTIVE_KB_EMBEDDINGS", raising=False)
    config = tmp_path / "mine.toml"
    config.write_text('kb_embeddings = "none"\n', encoding="utf-8")
    monkeypatch.setenv("COLLECTIVE_CONFIG", str(config))
    kb = tmp_path / "kb.sqlite"
    added = runner.invoke(app, ["kb", "add", str(docs), "--kb", str(kb), "--json"])
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["vectors_added"] == 0
    with SqliteKnowledgeStore(kb, embedder=None) as store:
        assert store.vector_status() == (None, 0, 4)
    found = runner.invoke(app, ["recall", "fence stains", "--kb", str(kb), "--json"])
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["dense"]["used"] is False  # lexical only, as the file says
    assert parsed_by == ["collective.config", "collective.config"]


def test_a_run_with_config_opens_its_kb_with_the_files_embedder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `ask --config FILE`: the KB the run opens (retrieval, the judge's kb_search) must use the
    # file's embedder; the settings carry it, nothing is exported to the environment.
    import os

    from collective.graph.context import open_knowledge
    from collective.session import load_settings

    monkeypatch.delenv("COLLECTIVE_KB_EMBEDDINGS", raising=False)
    monkeypatch.delenv("COLLECTIVE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "elsewhere.toml"
    config.write_text('kb_embeddings = "none"\n', encoding="utf-8")
    ctx = load_settings(config, {}).config.council_context()
    assert "COLLECTIVE_KB_EMBEDDINGS" not in os.environ
    ctx.kb = str(tmp_path / "kb.sqlite")
    store = open_knowledge(ctx)  # the demo KB seeded there, without vectors
    assert store.embedder is None  # type: ignore[attr-defined]
