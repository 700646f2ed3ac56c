"""Roles on one llama-server router that hosts two models (`--models-preset`, no `-m`).

The router runs each model in an instance of its own and routes requests by `model`: a spec
names one (`llama-server:URL?model=NAME`), every role reads its own model's window, slots and
tokenizer, `collective smoke` lists the router's `/models` and passes with a budget report
that fits on every call, and a spec that names no model is one clear error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from conftest import ServerProcess, free_port
from typer.testing import CliRunner

from collective.cli import app
from collective.errors import ConfigError
from collective.models.embedded import DEFAULT_EMBEDDED, embedded_model_path
from collective.models.llama_server import LlamaServerBackend

pytestmark = pytest.mark.integration

SMALL, MEMBER = "small", "member"
"""The router's names for the gemma 270M (2 slots of 2,048) and the Qwen 0.5B (2 of 4,096)."""


@pytest.fixture(scope="module")
def router(
    llama_server_binary: str, gguf_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    template = resources.files("collective") / "data/templates/gemma.jinja"
    preset = tmp_path_factory.mktemp("router") / "models.ini"
    threads = os.cpu_count() or 2
    preset.write_text(
        "version = 1\n"
        f"[*]\nnp = 2\nt = {threads}\n"
        f"[{SMALL}]\nmodel = {gguf_path}\nc = 4096\nchat-template-file = {template}\n"
        f"[{MEMBER}]\nmodel = {embedded_model_path(DEFAULT_EMBEDDED)}\nc = 8192\njinja = true\n"
    )
    port = free_port()
    argv = [llama_server_binary, "--models-preset", str(preset), "--models-max", "2"]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    server = ServerProcess(argv, port, "/health", name="router")
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_each_role_reads_its_own_models_window_and_counts_with_its_tokenizer(router):
    small = LlamaServerBackend(f"{router.url}?model={SMALL}")
    member = LlamaServerBackend(f"{router.url}?model={MEMBER}")
    try:
        assert small.spec == f"llama-server:{router.url}?model={SMALL}"
        assert await small.context_window() == 2048
        assert await member.context_window() == 4096
        assert (await small.pool()).server != (await member.pool()).server  # a pool each
        assert {name for name, _ in await member.models()} >= {SMALL, MEMBER}
        messages = [{"role": "user", "content": "Name one filament."}]
        for backend in (small, member):
            counted = await backend.count_prompt(messages)
            answer = await backend.chat(messages, max_tokens=4, temperature=0.0)
            assert answer.usage.prompt_tokens == counted  # each model's own template
            counter = await backend.token_counter()
            assert counter.count("polycarbonate") > 0
        # the two vocabularies differ: the router sent each count to its own model
        assert await small.count_prompt(messages) != await member.count_prompt(messages)
    finally:
        await small.aclose()
        await member.aclose()


async def test_a_spec_without_a_model_on_a_router_is_one_clear_error(router):
    unnamed = LlamaServerBackend(router.url)
    try:
        with pytest.raises(ConfigError, match=r"router serving several models \(.*member"):
            await unnamed.context_window()
        check = await unnamed.model_check()
        assert not check.ok and f"{router.url}?model=NAME" in check.detail
        missing = LlamaServerBackend(f"{router.url}?model=nothing-here")
        check = await missing.model_check()
        assert not check.ok and SMALL in check.detail and MEMBER in check.detail
        await missing.aclose()
    finally:
        await unnamed.aclose()


def test_smoke_passes_on_a_router_and_lists_its_models(router, tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("COLLECTIVE_") and name not in ("COLLECTIVE_CACHE",):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    small = f"llama-server:{router.url}?model={SMALL}"
    member = f"llama-server:{router.url}?model={MEMBER}"
    config = tmp_path / "router.toml"
    config.write_text(
        f'planner = "{member}"\njudge = "{member}"\nchat = "{small}"\nk = 2\n'
        f'[[specialists]]\nbackend = "{small}"\ncount = 2\n'
        "[output_caps]\nplanner = 16\nspecialist = 24\njudge = 32\nchat = 16\n"
    )
    result = CliRunner().invoke(app, ["smoke", "--config", str(config), "--json"])
    report = json.loads(result.stdout)
    assert result.exit_code == 0, result.output
    checks = {(c["check"], c["target"]): c for c in report["checks"]}
    for spec in (small, member):
        model = checks[("model", spec)]
        assert model["status"] == "pass"
        assert model["detail"].startswith("/models: ") and f"{SMALL} (" in model["detail"]
    assert "n_ctx 2,048" in checks[("context", f"specialist @ {small}")]["detail"]
    assert "n_ctx 4,096" in checks[("context", f"judge @ {member}")]["detail"]
    assert checks[("budget reports", "k=2")]["status"] == "pass"  # every call fits its window
    assert report["ok"] is True
