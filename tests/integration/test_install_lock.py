"""The install is hash-locked: `requirements.lock` names every dependency with its sha256, and
pip (`--require-hashes`, as the Makefile runs it) refuses a file the lock does not describe."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
LOCAL_BUILD = {"llama-cpp-python"}
"""Built on this machine for its CPU (ops/llama-cpp-python/build-wheel.sh): no published hash."""


def _locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (the lock's requirement line, its sha256 hashes)."""
    entries = re.split(r"\n(?=[a-z0-9])", LOCK.read_text().split("\n", 2)[2])
    locked = {}
    for entry in entries:
        if not entry.strip() or entry.startswith("#"):
            continue
        requirement = entry.split("\\")[0].strip()
        name = re.split(r"[=;\s]", requirement)[0].lower()
        locked[name] = (requirement, re.findall(r"--hash=sha256:([0-9a-f]{64})", entry))
    return locked


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement)[0].lower().replace("_", "-")


def test_every_dependency_is_pinned_with_hashes_in_the_lock():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]}
    wanted -= {"collective"} | LOCAL_BUILD
    locked = _locked()
    assert wanted <= set(locked), wanted - set(locked)
    assert not LOCAL_BUILD & set(locked)
    for name, (requirement, hashes) in locked.items():
        assert "==" in requirement and hashes, f"{name} is not pinned with a hash"
    assert "make lock" in LOCK.read_text().split("\n", 3)[1]  # how to refresh it


def _install(lock: Path) -> subprocess.CompletedProcess[str]:
    """What the Makefile runs, resolved and checked but installed nowhere."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps"]
        + ["--require-hashes", "-r", str(lock)],
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_a_tampered_hash_in_the_lock_fails_the_install_with_pips_message(tmp_path):
    requirement, hashes = _locked()["annotated-types"]
    good = tmp_path / "good.lock"
    good.write_text(f"{requirement} " + " ".join(f"--hash=sha256:{h}" for h in hashes) + "\n")
    assert _install(good).returncode == 0, _install(good).stderr[-2000:]
    tampered = tmp_path / "tampered.lock"
    wrong = "".join("0" if c != "0" else "1" for c in hashes[0])
    tampered.write_text(f"{requirement} --hash=sha256:{wrong}\n")
    run = _install(tampered)
    assert run.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE" in run.stderr
