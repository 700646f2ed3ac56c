"""Domain data (synonyms, complexity signals) lives in data files a deployment can replace."""

from __future__ import annotations

import pytest

from collective.errors import ConfigError
from collective.kb.retrieval import synonyms
from collective.memory.allowances import complexity_signals, detect_complexity


def test_the_packaged_files_are_read():
    assert synonyms() == {}  # empty by design since hybrid retrieval (see synonyms.txt)
    assert detect_complexity("Design a distributed cache for microservices").level == "multi-system"
    assert complexity_signals().long_task_words == 150


def test_your_own_synonyms_replace_the_packaged_ones(tmp_path, monkeypatch):
    path = tmp_path / "synonyms.txt"
    path.write_text("# cooking\nbake roast broil\n")
    monkeypatch.setenv("COLLECTIVE_SYNONYMS", str(path))
    assert synonyms() == {
        "bake": ("roast", "broil"),
        "roast": ("bake", "broil"),
        "broil": ("bake", "roast"),
    }
    monkeypatch.setenv("COLLECTIVE_SYNONYMS", str(tmp_path / "missing.txt"))
    with pytest.raises(ConfigError, match="COLLECTIVE_SYNONYMS"):
        synonyms()


def test_your_own_complexity_signals_replace_the_packaged_ones(tmp_path, monkeypatch):
    path = tmp_path / "signals.toml"
    path.write_text(
        "long_task_words = 400\nshort_task_words = 3\nmany_systems = 9\n"
        "system_nouns = '\\b(kiln)s?\\b'\n"
        "[[complex]]\npattern = '\\bglaze\\b'\nsignal = \"glazing\"\n"
    )
    monkeypatch.setenv("COLLECTIVE_COMPLEXITY_SIGNALS", str(path))
    assessment = detect_complexity("How should I glaze this bowl before firing it?")
    assert assessment.level == "complex" and "glazing" in assessment.reason
    assert detect_complexity("Design a distributed cache for services").level == "medium"
    monkeypatch.setenv("COLLECTIVE_COMPLEXITY_SIGNALS", str(tmp_path / "other.toml"))
    with pytest.raises(ConfigError, match="COLLECTIVE_COMPLEXITY_SIGNALS"):
        detect_complexity("anything")
