"""The Python examples of the README and the guides run as written, on the real embedded model:
the README's, docs/embedding.md's two, and docs/extending.md's backend and node (issue 55; the
retrieval profile and the claim rule need no model: tests/unit/test_docs.py runs them)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_pages import REPO, blocks, section

pytestmark = pytest.mark.integration


def embedding_examples() -> list[str]:
    return blocks(REPO / "docs" / "embedding.md", "python")


def extending_example(heading: str) -> str:
    (code,) = re.findall(r"```python\n(.*?)```", section(REPO / "docs/extending.md", heading), re.S)
    return code


def run(code: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLECTIVE_")}
    env["COLLECTIVE_EMBEDDED_MODEL"] = "gemma-3-270m"  # the small model, for speed
    env["COLLECTIVE_RERANK"] = "none"
    if os.environ.get("COLLECTIVE_CACHE"):
        env["COLLECTIVE_CACHE"] = os.environ["COLLECTIVE_CACHE"]
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_pages_have_their_examples():
    examples = embedding_examples()
    assert len(examples) == 2 and "council_node(" in examples[1]
    assert len(blocks(REPO / "README.md", "python")) == 1
    assert "register(" in extending_example("A backend")
    assert "council_node(" in extending_example("A node")


@pytest.mark.timeout(900)
def test_the_embedding_examples_run(tmp_path):
    """Both examples in one process (the model loads once), as a reader would paste them."""
    marker = '\nprint("--- example 2")\n'
    first, second = run(marker.join(embedding_examples()), tmp_path).split("--- example 2")
    assert first.strip() and second.strip()  # each printed its answer and citations
    assert sorted(p.name for p in (tmp_path / ".collective").iterdir()) == [
        "kb.sqlite",
        "kb.sqlite.lock",
    ]  # the demo KB; no checkpoint or memory files without being asked


@pytest.mark.timeout(900)
def test_the_readme_example_runs(tmp_path):
    (code,) = blocks(REPO / "README.md", "python")
    assert run(code, tmp_path).strip()


@pytest.mark.timeout(900)
def test_the_backend_example_audits_every_answer(tmp_path):
    out = run(extending_example("A backend"), tmp_path)
    audit = (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(audit) == 1 and '"model": "gemma-3-270m' in audit[0]
    assert audit[0] in out


@pytest.mark.timeout(900)
def test_the_node_example_runs_after_the_council(tmp_path):
    reply = run(extending_example("A node"), tmp_path).strip()
    assert reply  # the verdict, or the node's warning before it
