"""The judge's tool calling over real HTTP: OpenAI-style tools on the real llama-server.

The server runs the gemma model with `--jinja` and a template that renders tools
(tests/data/gemma-tools.jinja), so llama.cpp's own tool-call handling (grammar-constrained
generic format) parses what the model writes. The exact multi-round sequence is driven with a
scripted backend in tests/unit/test_judge_tools.py; this proves the wiring.
"""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, ServerProcess, free_port, llama_server_argv

from collective.graph import CouncilContext, build_graph
from collective.kb.tools import VerificationTools
from collective.models.llama_server import LlamaServerBackend

pytestmark = pytest.mark.integration

TEMPLATE = REPO / "tests" / "data" / "gemma-tools.jinja"


@pytest.fixture(scope="module")
def tool_server(llama_server_binary: str, gguf_path: Path) -> Iterator[ServerProcess]:
    port = free_port()
    argv = llama_server_argv(llama_server_binary, gguf_path, port, 8192, 1)
    server = ServerProcess(
        [*argv, "--jinja", "--chat-template-file", str(TEMPLATE)], port, "/health", name="tools"
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_tools_round_trip_through_the_real_server(tool_server, tmp_path):
    backend = LlamaServerBackend(tool_server.url)
    try:
        assert await backend.context_window() == 8192
        assert backend.supports_tools  # discovered from /props chat_template_caps
        from collective.kb.demo import open_default_store

        tools = VerificationTools(open_default_store(tmp_path / "kb.sqlite"), "lean")
        messages = [{"role": "user", "content": "Search the knowledge base for PETG drying."}]
        # gemma 270M does not call tools on its own; `required` makes the server constrain its
        # output to the template's tool-call format, which llama.cpp then parses (offered one
        # tool: with two, the small model rambles past its token limit before calling either)
        search = tools.schemas[:1]
        first = await backend.chat(
            messages, max_tokens=96, tools=search, tool_choice="required", temperature=0
        )
        assert first.tool_calls
        for call in first.tool_calls:
            assert call.name in {"kb_search", "kb_get"} and isinstance(call.arguments, dict)
            assert call.id

        # the replay the judge sends after a round: assistant tool calls, then tool results
        call = first.tool_calls[0]
        result = tools.run(call.name, call.arguments)
        replay = [
            *messages,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call.id, "content": result},
        ]
        counted = await backend.count_prompt(replay, search)
        second = await backend.chat(replay, max_tokens=32, tools=search, temperature=0)
        assert second.usage.prompt_tokens == counted  # exact, tools and tool messages included
        assert tools.fetched or "no chunk" in result or "no matching" in result
    finally:
        await backend.aclose()


async def test_the_judge_runs_its_tool_loop_against_the_real_server(tool_server, tmp_path):
    ctx = CouncilContext(
        k=1,
        planner="embedded",
        specialists=["embedded"],
        judge=f"llama-server:{tool_server.url}",
        kb=str(tmp_path / "kb.sqlite"),
        retrieval="lean",
        tool_rounds=1,
        output_caps={"planner": 16, "specialist": 32, "judge": 48},
    )
    out = await build_graph().ainvoke({"question": "How should PETG be dried?"}, context=ctx)
    judge_budgets = [b for b in out["budgets"] if b["node"] == "judge"]
    assert judge_budgets[0]["token_counter"] == "exact:llama-server"
    tools = next(s for s in judge_budgets[0]["sections"] if s["name"] == "tools")
    assert tools["used"] > 0  # the schemas were counted into the judge's budget
    assert not any("without tools" in note for note in out.get("notes", []))
    # one round offered tools; a tool call (if the model made one) is replayed in round two
    assert len(judge_budgets) == 1 + bool(out["tool_calls"])
    for budget in judge_budgets:
        assert budget["prompt_tokens"] + budget["max_output_tokens"] <= budget["n_ctx"] == 8192
