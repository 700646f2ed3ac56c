"""A backend from another package, found through the `collective.backends` entry-point group.

The package is laid out the way pip installs one (a module and its `.dist-info` with
`entry_points.txt`) on a temporary `sys.path` entry; nothing in collective names it.
"""

from __future__ import annotations

import logging
import textwrap

import pytest

from collective.graph import CouncilContext, build_graph
from collective.models import registry
from tests.fakes import ListStore

PARROT = '''
"""`parrot:NAME`: answers every call with the same sentence (a backend outside collective)."""

from collective.budget.counting import tiktoken_counter
from collective.models.base import Backend, ChatResult, Health, Usage
from collective.models.registry import BackendKind, BackendSpec, register


class Parrot(Backend):
    def __init__(self, name):
        self.spec, self.model = f"parrot:{name}", name
        self._counter = tiktoken_counter("cl100k_base")

    async def context_window(self):
        return 32768

    async def token_counter(self):
        return self._counter

    async def chat(self, messages, *, max_tokens, **options):
        text = "ASA: it keeps its shape in a hot car [kb:asa-heat]."
        usage = Usage(self._counter.count_messages(messages), self._counter.count(text))
        return ChatResult(text=text, usage=usage, model=self.model)

    async def health(self):
        return Health(True, "parrot")


register(
    BackendKind(
        name="parrot",
        form="parrot:NAME",
        parse=lambda spec, rest: BackendSpec("parrot", model=rest),
        create=lambda spec: Parrot(spec.model),
    )
)
'''


def _install(root, name: str, entry_points: str, module: str = "") -> None:
    """Lay out distribution `name` as pip would: its module and its dist-info."""
    if module:
        (root / f"{name}.py").write_text(module)
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry as a new process finds it: plugins not yet looked for."""
    monkeypatch.setattr(registry, "_kinds", dict(registry._kinds))
    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.setattr(registry, "_cache", {})


async def test_a_backend_package_found_by_entry_point_runs_a_council(
    tmp_path, monkeypatch, fresh_registry
):
    _install(tmp_path, "parrot_backend", "[collective.backends]\nparrot = parrot_backend\n", PARROT)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "parrot:NAME" in registry.valid_forms()
    from collective.kb.store import Chunk

    ctx = CouncilContext(
        planner="parrot:planner",
        judge="parrot:judge",
        specialists=["parrot:a", "parrot:b"],
        k=2,
        knowledge=ListStore([Chunk(id="asa-heat", source="asa.md", text="ASA resists heat.")]),
        usage_log=None,
        retrieval="lean",
    )
    out = await build_graph().ainvoke({"question": "Which filament for a hot car?"}, context=ctx)
    assert out["answer"].startswith("ASA")
    assert {b["model"] for b in out["budgets"]} >= {"planner", "a", "b", "judge"}
    await registry.close_all()


def test_a_broken_plugin_is_named_in_the_log_and_the_built_in_backends_still_work(
    tmp_path, monkeypatch, fresh_registry, caplog
):
    _install(tmp_path, "broken_backend", "[collective.backends]\nbroken = no_such_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="collective.models.registry"):
        forms = registry.valid_forms()
    assert any(f.startswith("llama-server:") for f in forms)
    assert "broken = 'no_such_module' of broken_backend" in caplog.text


def test_a_plugin_cannot_take_a_built_in_prefix(fresh_registry):
    kinds = registry._all_kinds()
    clash = registry.BackendKind(
        "ollama", "ollama:X", kinds["ollama"].parse, kinds["ollama"].create
    )
    with pytest.raises(Exception, match="two backends register the spec prefix 'ollama'"):
        registry.register(clash)
