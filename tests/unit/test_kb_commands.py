"""`collective kb` and `collective recall`, driven through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from collective.commands import kb as kb_command
from collective.commands import recall as recall_command

app = typer.Typer()
app.add_typer(kb_command.app, name="kb")
app.command()(recall_command.recall)
runner = CliRunner()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "petg.md").write_text(
        "# PETG\n\n## Drying\nDry PETG at 65 °C for four hours.\n\n"
        "## Note #meta\nMaintainer note about PETG.\n",
        encoding="utf-8",
    )
    (folder / "pla.txt").write_text("PLA prints at 200 °C and softens at 60 °C.\n", "utf-8")
    return folder


def test_kb_add_list_rm_roundtrip(tmp_path: Path, docs: Path) -> None:
    kb = tmp_path / "kb.sqlite"
    result = runner.invoke(app, ["kb", "add", str(docs), "--kb", str(kb), "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert (stats["files"], stats["added"], stats["chunks"]) == (2, 3, 3)

    again = runner.invoke(app, ["kb", "add", str(docs), "--kb", str(kb)])
    assert again.exit_code == 0 and "0 chunks added" in again.stdout

    listed = json.loads(runner.invoke(app, ["kb", "list", "--kb", str(kb), "--json"]).stdout)
    assert len(listed["chunks"]) == 3
    meta = [c for c in listed["chunks"] if "meta" in c["tags"]]
    assert meta and meta[0]["heading"] == "PETG > Note"
    table = runner.invoke(app, ["kb", "list", "--kb", str(kb)])
    assert table.exit_code == 0 and meta[0]["id"] in table.stdout

    removed = runner.invoke(app, ["kb", "rm", meta[0]["id"], "--kb", str(kb)])
    assert removed.exit_code == 0 and "removed 1" in removed.stdout
    by_source = runner.invoke(app, ["kb", "rm", "--source", str(docs / "pla.txt"), "--kb", str(kb)])
    assert by_source.exit_code == 0 and "removed 1" in by_source.stdout
    listed = json.loads(runner.invoke(app, ["kb", "list", "--kb", str(kb), "--json"]).stdout)
    assert [c["heading"] for c in listed["chunks"]] == ["PETG > Drying"]


def test_kb_errors_are_one_line_with_exit_2(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["kb", "list", "--kb", str(tmp_path / "none.sqlite")])
    assert missing.exit_code == 2 and "no knowledge base at" in missing.output
    bad = runner.invoke(app, ["kb", "add", str(tmp_path / "nope.md"), "--kb", str(tmp_path / "k")])
    assert bad.exit_code == 2 and "no such file or directory" in bad.output
    assert len(bad.output.strip().splitlines()) == 1


def test_recall_json_and_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COLLECTIVE_KB", raising=False)
    result = runner.invoke(
        app, ["recall", "Which filament for a hot car?", "--retrieval", "deep", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["requested"], data["applied"]) == ("deep", "deep")
    assert data["candidates"] >= len(data["injected"]) >= 8
    assert data["chunks"][0]["text"] and data["chunks"][0]["source"].startswith("demo_kb/")
    assert (tmp_path / ".collective" / "kb.sqlite").exists()  # demo KB seeded on first use

    text = runner.invoke(app, ["recall", "PETG drying", "--retrieval", "lean", "--max-inject", "2"])
    assert text.exit_code == 0
    assert "applied lean" in text.stdout and "diagnostics" in text.stdout
    assert text.stdout.count("[KB#mem_") == 2 and "score" in text.stdout


def test_recall_errors(tmp_path: Path) -> None:
    empty = runner.invoke(app, ["recall", "   "])
    assert empty.exit_code == 2 and "query is empty" in empty.output
    missing = runner.invoke(app, ["recall", "PETG", "--kb", str(tmp_path / "missing.sqlite")])
    assert missing.exit_code == 2 and "no knowledge base at" in missing.output
    profile = runner.invoke(app, ["recall", "PETG", "--retrieval", "turbo"])
    assert profile.exit_code == 2 and "unknown --retrieval 'turbo'" in profile.output
    # --budget, the old name, is still taken, with a note that names the new one (issue 55)
    old = runner.invoke(app, ["recall", "PETG", "--budget", "turbo"])
    assert old.exit_code == 2 and "--budget is now --retrieval" in old.output
    both = runner.invoke(app, ["recall", "PETG", "--budget", "lean", "--retrieval", "deep"])
    assert both.exit_code == 2 and "give the profile once" in both.output
