"""`checkpoints` and `store`: a file path or a postgresql:// URL, from any layer; else refused."""

import json

import pytest

from collective.cli import main
from collective.config import load_config
from collective.errors import ConfigError
from collective.memory.store import check_location, redact

URL = "postgresql://collective:s3cret@127.0.0.1:1/council"


def test_env_urls_stay_urls(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTIVE_CHECKPOINTS", URL)
    monkeypatch.setenv("COLLECTIVE_STORE", URL)
    config = load_config(dotenv=None).config
    assert config.checkpoints == URL and config.store == URL


@pytest.mark.parametrize("bad", ["mysql://h/db", "sqlite:///x.db", "http://h", " "])
def test_other_locations_are_refused(bad):
    with pytest.raises(ConfigError, match="store"):
        load_config(overrides={"store": bad}, dotenv=None)


def test_paths_pass_and_passwords_are_hidden():
    assert check_location(".collective/memory.sqlite", "store") == ".collective/memory.sqlite"
    assert redact(URL) == "postgresql://collective:***@127.0.0.1:1/council"


def test_cli_takes_a_url_as_a_url_not_a_file(tmp_path, monkeypatch, capsys):
    """It was a SQLite file named `postgresql:/...` and exit 0."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLLECTIVE_STORE", str(tmp_path / "memory.sqlite"))
    with pytest.raises(SystemExit) as exit:
        main(["ask", "Hot car?", "--checkpoints", URL, "--json"])
    assert exit.value.code == 2
    message = json.loads(capsys.readouterr().out)["error"]["message"]
    assert "cannot use PostgreSQL at postgresql://collective:***@127.0.0.1:1/council" in message
    assert "s3cret" not in message
    assert not list(tmp_path.glob("postgresql*"))


def test_the_default_kb_follows_the_working_directory(tmp_path, monkeypatch):
    from collective.graph.context import CouncilContext, open_knowledge

    monkeypatch.delenv("COLLECTIVE_KB", raising=False)
    stores = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        stores.append(open_knowledge(CouncilContext(kb_embeddings="none")))
        assert (tmp_path / name / ".collective" / "kb.sqlite").exists()  # seeded here
    assert stores[0] is not stores[1]
    for store in stores:
        store.close()
