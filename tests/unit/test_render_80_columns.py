"""The live view and the budget table at 80 columns: short model names, nothing folded into a
lone `@` line or a path broken mid-word; `--verbose` shows the whole spec."""

from __future__ import annotations

import re

from rich.console import Console

from collective.commands.render import ProgressView, budget_table, short_model, short_server
from tests.cli import run

GGUF = "/root/.cache/collective/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
CALLS = [
    ("plan", "qwen2.5-coder-0.5b-instruct-q4_k_m", f"llamacpp:{GGUF}"),
    ("specialist-1", "qwen2.5-coder-0.5b-instruct-q4_k_m", f"llamacpp:{GGUF}"),
    ("specialist-2", "gpt-oss-120b", "llama-server:http://10.0.0.12:8083"),
    ("specialist-3", "Qwen/Qwen2.5-7B-Instruct", "openai:Qwen/Qwen2.5-7B-Instruct@http://gpu:8000"),
    ("judge", "qwen2.5-coder-1.5b-instruct-q4_k_m", "embedded:qwen2.5-coder-1.5b"),
]


def _report(node: str, model: str, server: str) -> dict:
    return {
        "node": node,
        "model": model,
        "server": server,
        "n_ctx": 32_768,
        "token_counter": "exact:llamacpp",
        "prompt_tokens": 2_000,
        "max_output_tokens": 384,
        "shared_tokens": 1_800,
        "sections": [{"name": "kb_chunks", "allocated": 2500, "used": 1520, "trimmed": True}],
        "memory_profile": "specialist-broad",
        "memory_tier": "simple -> medium",
    }


def _rendered(verbose: bool) -> str:
    console = Console(record=True, width=80, force_terminal=False)
    view = ProgressView(3, console, verbose=verbose)
    for node, model, server in CALLS:
        event = {"type": "progress", "node": node, "status": "done", "model": model}
        view.event(event | {"server": server, "tokens_in": 2000, "tokens_out": 120, "ms": 4500})
    console.print(view.render())
    console.print(budget_table([_report(*call) for call in CALLS], verbose=verbose))
    return console.export_text()


def test_at_80_columns_no_line_is_a_lone_at_and_no_path_is_broken():
    text = _rendered(verbose=False)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert not [line for line in text.splitlines() if line.strip() == "@"]
    assert "/root" not in text and ".gguf" not in text  # the in-process model: its name only
    for word in re.findall(r"\S+", text):
        if "/" in word and ("." in word or ":" in word):  # a path or URL: whole on its line
            assert any(word in spec or word in model for _, model, spec in CALLS), word
    assert text.count("qwen2.5-coder-0.5b ") >= 2 and "10.0.0.12:8083" in text


def test_verbose_shows_every_spec_whole():
    text = _rendered(verbose=True).replace("\n", "")
    flat = re.sub(r"\s+", "", text)
    assert GGUF in flat and "llama-server:http://10.0.0.12:8083" in flat


def test_short_names():
    assert short_model("qwen2.5-coder-0.5b-instruct-q4_k_m") == "qwen2.5-coder-0.5b"
    assert short_model(GGUF) == "qwen2.5-coder-0.5b"
    assert short_model("gemma-3-270m-Q4_K_M.gguf") == "gemma-3-270m"
    assert short_model("gpt-oss-120b") == "gpt-oss-120b"
    assert short_server(f"llamacpp:{GGUF}") == "" == short_server("embedded:qwen2.5-coder-0.5b")
    assert short_server("ollama:gemma3:270m@http://127.0.0.1:11434") == "127.0.0.1:11434"


def test_the_command_lines_verbose_option_reaches_the_view():
    import typer

    from collective.commands import render

    app = typer.Typer()
    seen = []

    @app.callback()
    def root(verbose: bool = typer.Option(False, "--verbose")) -> None:
        pass

    @app.command()
    def show() -> None:
        seen.append(render._verbose())

    from typer.testing import CliRunner

    CliRunner().invoke(app, ["--verbose", "show"])
    CliRunner().invoke(app, ["show"])
    assert seen == [True, False]
    assert run(["models"])[0] == 0  # the real command line still runs
