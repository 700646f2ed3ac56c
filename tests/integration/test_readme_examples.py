"""The README's Embedding examples run as written, on the real embedded model."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def embedding_examples():
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Embedding\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_readme_has_both_embedding_examples():
    examples = embedding_examples()
    assert len(examples) == 2
    assert "council_node(" in examples[1]


@pytest.mark.timeout(900)
def test_readme_embedding_examples_run(tmp_path, gguf_path):
    """Both examples in one process (the model loads once), as a reader would paste them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLECTIVE_")}
    env["COLLECTIVE_EMBEDDED_MODEL"] = "gemma-3-270m"  # the small model, for speed
    if os.environ.get("COLLECTIVE_CACHE"):
        env["COLLECTIVE_CACHE"] = os.environ["COLLECTIVE_CACHE"]
    env["PYTHONPATH"] = str(REPO)
    marker = '\nprint("--- example 2")\n'
    done = subprocess.run(
        [sys.executable, "-c", marker.join(embedding_examples())],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = done.stdout.split("--- example 2")
    assert first.strip() and second.strip()  # each printed its answer and citations
    assert sorted(p.name for p in (tmp_path / ".collective").iterdir()) == [
        "kb.sqlite",
        "kb.sqlite.lock",
    ]  # the demo KB; no checkpoint or memory files without being asked
