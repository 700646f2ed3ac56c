"""The house rules of issue 24, checked: one settings list, settings read once, no import cycle,
a thin `ask`, no long function without a reason.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collective.budget.plans import BudgetSections
from collective.config import CollectiveConfig, load_config
from collective.graph import CouncilContext, build_graph
from collective.memory.allowances import ProfileAssignments
from tests.fakes import ScriptedBackend

PACKAGE = Path(__file__).resolve().parents[2] / "collective"

pytestmark = pytest.mark.usefixtures("clean_cwd")


def test_every_setting_is_declared_once_and_a_run_context_agrees_with_it(monkeypatch):
    """Issue 55: the settings class declares each setting (its type, default and meaning, which
    a reader and mypy see); a run's `CouncilContext` takes the run's part of them with the same
    names and defaults (only the command line's usage log is on by default)."""
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_"):
            monkeypatch.delenv(name)
    run = [f.name for f in dataclasses.fields(CouncilContext) if f.init and f.name != "knowledge"]
    assert set(run) <= set(CollectiveConfig.model_fields), "declare it in CollectiveConfig"
    from_settings, bare = CollectiveConfig().council_context(), CouncilContext()
    differ = [n for n in run if getattr(from_settings, n) != getattr(bare, n)]
    assert differ == ["usage_log"], "a setting's default differs from the context's"


CONFIG = """
k = 2
[budgets.specialist]
n_ctx = 32768
output = 512
sections = { system = 500, kb_chunks = 2000, task = 300 }

[agent_profiles]
specialist = "mine"

[allowance_profiles.mine]
base_budget = 1000
max_budget = 2000
scope_weights = { global = 0.5, agent_recent = 0.25, agent_patterns = 0.25 }
"""


async def test_budgets_and_profiles_are_read_once_per_settings_object(tmp_path, monkeypatch):
    """They were read three times: config's checks, the context, and every model call."""
    reads: list[str] = []
    plan, from_settings = BudgetSections.plan, ProfileAssignments.from_settings.__func__

    def counted_plan(self, name):
        reads.append("plan")
        return plan(self, name)

    def counted_profiles(cls, settings):
        reads.append("profiles")
        return from_settings(cls, settings)

    monkeypatch.setattr(BudgetSections, "plan", counted_plan)
    monkeypatch.setattr(ProfileAssignments, "from_settings", classmethod(counted_profiles))
    (tmp_path / "c.toml").write_text(CONFIG)
    config = load_config(tmp_path / "c.toml").config
    assert sorted(reads) == ["plan", "profiles"]

    ctx = config.council_context()
    for name in ("planner", "judge"):
        setattr(ctx, name, ScriptedBackend(name, "ASA."))
    ctx.specialists = [ScriptedBackend("spec", "ASA.")]
    ctx.retrieval, ctx.usage_log = "lean", None
    out = await build_graph().ainvoke({"question": "Which filament for a hot car?"}, context=ctx)
    assert sorted(reads) == ["plan", "profiles"]  # the run read none of them again
    spec = next(b for b in out["budgets"] if b["node"] == "specialist-1")
    assert spec["memory_profile"] == "mine" and spec["max_output_tokens"] <= 512


def _imports(path: Path) -> set[str]:
    """What a module imports anywhere (functions too), but under `if TYPE_CHECKING` and, in a
    package's `__init__`, its lazy `__getattr__` (that import is made by whoever asks)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {
        id(n)
        for node in ast.walk(tree)
        if (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
        or (
            path.name == "__init__.py"
            and isinstance(node, ast.FunctionDef)
            and node.name == "__getattr__"
        )
        for n in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: a relative import; write it absolute"
            found |= {node.module or ""} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def _module_graph() -> dict[str, set[str]]:
    """Module -> the collective modules it imports, with the packages whose `__init__` that
    runs (importing `collective.graph.context` runs `collective.graph`)."""
    files = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    graph = {}
    for module, path in files.items():
        edges = set()
        for target in _imports(path):
            while target and target not in files:  # `from pkg import name`: the module pkg
                target = target.rpartition(".")[0]
            while target.count("."):  # the target and each package above it
                if target != module and not module.startswith(f"{target}."):
                    edges.add(target)
                target = target.rpartition(".")[0]
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_in_the_package_function_level_imports_included():
    """`import collective.nodes.plan` failed on its own: collective.graph imported the builder,
    which imports the nodes, which read collective.graph.context."""
    for module in ("collective.nodes.plan", "collective.graph.context", "collective.config"):
        alone = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
        assert alone.returncode == 0, alone.stderr.decode()[-500:]
    graph = _module_graph()
    assert len(graph) > 50
    assert _cycles(graph) == []
    # The check sees cycles: one closed on purpose is found.
    graph["collective.errors"] = {"collective.config"}
    assert _cycles(graph)


def test_the_ask_command_is_options_and_printing():
    lines = (PACKAGE / "commands/ask.py").read_text(encoding="utf-8").count("\n")
    assert lines < 300


LONG = 80
"""The most lines a function has unless its docstring gives the reason (`Long: ...`)."""


def test_no_function_over_80_lines_without_a_reason_in_its_docstring():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > LONG and "Long:" not in (ast.get_docstring(node) or ""):
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}")
    assert long == [], "split these into named steps, or say why not in the docstring (Long: ...)"


def test_environment_variables_are_read_in_one_place():
    """`collective/environment.py` reads them; elsewhere they are only set (for child code)."""
    reads = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "environment.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = ast.unparse(node) if isinstance(node, ast.Call | ast.Subscript) else ""
            called = text.startswith(("os.getenv(", "os.environ.get(", "getenv("))
            indexed = isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
            if called or (indexed and text.startswith("os.environ[")):
                reads.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {text}")
    assert reads == [], "read environment variables through collective.environment"


def test_no_node_module_is_imported_by_a_non_node_module():
    """Helpers that others need (`open_knowledge`, `resolve_backend`) live outside `nodes/`:
    only the builder, which composes the graph, imports a node module."""
    importers = {
        f"{module} -> {target}"
        for module, targets in _module_graph().items()
        for target in targets
        if target.startswith("collective.nodes.")
        and not module.startswith("collective.nodes")
        and module != "collective.graph.builder"
    }
    assert importers == set(), "a helper others need belongs outside nodes/"


def _string_groups(path: Path) -> list[tuple[int, set[str]]]:
    """Every tuple, list, set, dict (its keys) and `Literal[...]` of string literals."""
    groups = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        items: list[ast.expr | None] = []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = list(node.keys)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Literal"):
            inner = node.slice
            items = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        elif isinstance(node, ast.ClassDef):  # an enum's members
            items = [s.value for s in node.body if isinstance(s, ast.Assign)]
        words = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
        if words:
            groups.append((node.lineno, words))
    return groups


def _graph_calls_with_a_literal_name(path: Path) -> list[int]:
    """Lines where a node is named by a string literal in the graph's own calls."""
    calls = ("add_node", "add_edge", "add_conditional_edges", "Send")
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and ast.unparse(node.func).rpartition(".")[2] in calls
        and any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)
    ]


def test_node_and_mode_names_are_declared_once():
    """`collective.agents` spells the node and answer-mode names; everyone else imports them
    (the builder, the live view, the session and two mode enums each had their own list)."""
    from collective import agents

    nodes, modes = set(agents.NODES), {m.value for m in agents.Mode}
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE.parent)
        spelled += [
            f"{where}:{line} a node named by a literal"
            for line in _graph_calls_with_a_literal_name(path)
        ]
        if path.name == "agents.py":
            continue
        for line, words in _string_groups(path):
            if len(words & nodes) >= 3 or len(words & modes) >= 2:
                spelled.append(f"{where}:{line} {sorted(words & (nodes | modes))}")
    assert spelled == [], "import the names from collective.agents"


HTTP_CLIENTS = ("httpx", "httpx_sse", "requests", "aiohttp", "urllib3", "urllib.request")
"""Libraries that open HTTP connections (and `http.client`, ollama's clients, raw sockets)."""


def _opens_http(path: Path) -> list[str]:
    """What in a module could open an HTTP connection."""
    found = [
        name
        for name in _imports(path)
        if name.startswith(HTTP_CLIENTS + ("http.client",))
        or name in ("ollama", "ollama.AsyncClient", "ollama.Client")
    ]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found += [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and ast.unparse(node) in ("socket.create_connection", "socket.socket")
    ]
    return found


def test_one_module_opens_http_connections():
    """`collective/models/http.py` is the choke point: requests, streams, retries, 503 waits and
    error translation for every backend, counter and embedder (there were four clients)."""
    opening = {
        str(path.relative_to(PACKAGE.parent)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if (found := _opens_http(path))
    }
    # `collective serve` binds its own listening socket (collective/serve/server.py): it opens
    # no connection to anything
    listening = {"collective/serve/server.py": ["socket.socket"] * 3}
    assert {k: v for k, v in opening.items() if listening.get(k) != v} == {
        "collective/models/http.py": opening.get("collective/models/http.py")
    }, opening
