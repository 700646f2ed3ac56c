"""The KB's vectors from an embedding server of one's own: llama-server `--embedding` (issue 26)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from collective.errors import ConfigError
from collective.kb.retrieval import retrieve
from collective.kb.sqlite_store import SqliteKnowledgeStore
from tests.integration.conftest import ServerProcess, serving_llama_server

pytestmark = pytest.mark.integration


def _setting() -> str:
    from collective.config import load_config

    return load_config(dotenv=None).config.kb_embeddings


@pytest.fixture(scope="module")
def embedding_server(llama_server_binary: str, gguf_path: Path) -> Iterator[ServerProcess]:
    yield from serving_llama_server(
        llama_server_binary,
        gguf_path,
        "--embedding",
        "--pooling",
        "mean",
        "-c",
        "2048",
        name="llama-server-embedding",
    )


def test_a_kb_embedded_by_a_server_and_refused_by_another_model(
    tmp_path: Path, embedding_server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cedar.md").write_text(
        "# cedar\n\n## Finishing\nTannins can stain iron fasteners.\n\n"
        "## Uses\nSiding, fences and decks.\n",
        encoding="utf-8",
    )
    # The config file names the server in the chat backends' form; the settings hand it on.
    config = tmp_path / "collective.toml"
    config.write_text(f'kb_embeddings = "openai:gemma-3-270m@{embedding_server.url}"\n')
    monkeypatch.setenv("COLLECTIVE_CONFIG", str(config))
    monkeypatch.delenv("COLLECTIVE_KB_EMBEDDINGS", raising=False)
    kb = tmp_path / "kb.sqlite"
    with SqliteKnowledgeStore(kb, embeddings=_setting()) as store:
        store.add_paths([docs])
        model, vectors, chunks = store.vector_status()
        assert (model, vectors, chunks) == ("gemma-3-270m", 2, 2)
        result = retrieve(store, "stains on the fence", "balanced")
        assert result.dense["used"] is True and result.injected

    # The first form (the endpoint's URL, then the model) still names the same model.
    spec = f"openai:{embedding_server.url}/v1/embeddings#gemma-3-270m"
    monkeypatch.setenv("COLLECTIVE_KB_EMBEDDINGS", spec)
    with SqliteKnowledgeStore(kb, embeddings=_setting()) as store:
        assert retrieve(store, "stains on the fence", "balanced").dense["used"] is True

    monkeypatch.delenv("COLLECTIVE_KB_EMBEDDINGS")
    monkeypatch.delenv("COLLECTIVE_CONFIG")  # the bundled model: not this KB's
    with SqliteKnowledgeStore(kb, embeddings=_setting()) as store:
        with pytest.raises(ConfigError, match="'gemma-3-270m'.*collective kb reindex"):
            retrieve(store, "stains on the fence", "balanced")
