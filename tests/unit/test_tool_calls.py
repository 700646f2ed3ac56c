"""Tool calls: a held call's schema is bounded so its grammar closes within the cap, and a call
cut at its cap says so, with the cap and the setting to raise."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from collective.budget.assembly import text_section
from collective.budgeted_call import budgeted_call
from collective.errors import InvalidResponse, ToolCallCut
from collective.graph.context import CouncilContext
from collective.kb.tools import ID_CHARS, QUERY_CHARS, VerificationTools
from collective.models.base import ChatResult, Usage
from collective.models.tool_calls import MAX_ITEMS, MAX_STRING, text_calls, tool_call_schema
from tests.fakes import ListStore, ScriptedBackend

KB_TOOLS = VerificationTools(ListStore([]), "lean").schemas


def tool(name: str, parameters: dict[str, Any] | None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


STRING = {"type": "string"}
SHAPES = {  # tools of every shape a schema may take, none of them from the issue
    "kb tools": KB_TOOLS,
    "unbounded string": [tool("note", obj(text=STRING))],
    "two strings": [tool("rename", obj(old=STRING, new=STRING))],
    "nested object": [tool("place", obj(where=obj(city=STRING, street=STRING)))],
    "array of strings": [tool("tag", obj(tags={"type": "array", "items": STRING}))],
    "scalars": [
        tool(
            "set",
            obj(
                n={"type": "integer"},
                x={"type": "number"},
                on={"type": "boolean"},
                nothing={"type": "null"},
            ),
        )
    ],
    "enum": [tool("pick", obj(colour={"enum": ["red", "green", "a much longer colour"]}))],
    "no parameters": [tool("now", None)],
    "bare object": [tool("any", {"type": "object"})],
    "open object": [tool("map", {"type": "object", "additionalProperties": True})],
    "min length": [tool("code", obj(code={"type": "string", "minLength": 4}))],
    "own bounds": [
        tool("short", obj(s={"type": "string", "maxLength": 7})),
        tool("list", obj(xs={"type": "array", "items": STRING, "maxItems": 3})),
    ],
}


def walk(schema: Any) -> list[dict[str, Any]]:
    """Every schema nested in `schema` (properties, items, anyOf), `schema` first."""
    if not isinstance(schema, dict):
        return []
    found = [schema]
    for key, value in schema.items():
        if key == "properties":
            found += [s for v in value.values() for s in walk(v)]
        elif key == "items":
            found += walk(value)
        elif key == "anyOf":
            found += [s for v in value for s in walk(v)]
    return found


def longest_call(schema: dict[str, Any]) -> str:
    """The longest JSON an instance of `schema` (a bounded call) can be: every string its
    `maxLength` of six-byte escapes, every array full, one space after every token."""

    def write(s: dict[str, Any]) -> str:
        if "const" in s:
            return json.dumps(s["const"]) + " "
        if "enum" in s:
            return max((json.dumps(v) for v in s["enum"]), key=len) + " "
        if "anyOf" in s:
            return max((write(v) for v in s["anyOf"]), key=len)
        kind = s.get("type")
        if kind == "string":
            return '"' + "\\u00e9" * s["maxLength"] + '" '
        if kind == "integer":
            return "-" + "9" * 16 + " "
        if kind == "number":
            return "-" + "9" * 16 + "." + "9" * 16 + "e-" + "9" * 16 + " "
        if kind == "boolean":
            return "false "
        if kind == "null":
            return "null "
        if kind == "array":
            return "[ " + ", ".join([write(s["items"])] * s["maxItems"]) + "] "
        kvs = [json.dumps(k) + " : " + write(v) for k, v in s["properties"].items()]
        return "{ " + ", ".join(kvs) + "} "

    return write(schema)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("cap", [None, 2_000, 256, 120])
def test_a_held_call_is_bounded_and_its_longest_form_fits_the_cap(shape: str, cap: int | None):
    tools = SHAPES[shape]
    try:
        schema = tool_call_schema(tools, cap)
    except ToolCallCut as error:  # even its shortest form would not fit: said before sending
        assert cap is not None and cap <= 256 and error.cap == cap
        assert f"output cap of {cap} tokens cannot hold a call to" in str(error)
        return
    assert len(schema["anyOf"]) == len(tools)
    for call, offered in zip(schema["anyOf"], tools, strict=True):
        assert call["properties"]["name"] == {"const": offered["function"]["name"]}
        for s in walk(call):
            if s.get("type") == "string":
                assert s.get("minLength", 0) <= s["maxLength"] <= MAX_STRING
            if s.get("type") == "array":
                assert s["maxItems"] <= MAX_ITEMS
            if s.get("type") == "object":
                assert s["additionalProperties"] is False
        longest = longest_call(call)
        json.loads(longest)  # it is a call the grammar allows: valid JSON
        if cap is not None:  # a token writes at least one byte; one more for end of generation
            assert len(longest.encode()) + 1 <= cap, (shape, cap, longest)


def test_strings_keep_their_own_bounds_and_shrink_only_for_a_small_cap():
    def bounds(cap: int | None) -> dict[str, int]:
        return {
            c["properties"]["name"]["const"]: next(
                iter(c["properties"]["arguments"]["properties"].values())
            )["maxLength"]
            for c in tool_call_schema(KB_TOOLS, cap)["anyOf"]
        }

    assert bounds(None) == bounds(10_000) == {"kb_search": QUERY_CHARS, "kb_get": ID_CHARS}
    small = bounds(256)
    assert 0 < small["kb_search"] < QUERY_CHARS and small["kb_get"] <= ID_CHARS


def test_a_cap_too_small_for_any_call_is_refused_with_the_cap_named():
    with pytest.raises(
        ToolCallCut, match="output cap of 40 tokens cannot hold a call to kb_search"
    ):
        tool_call_schema(KB_TOOLS, 40)
    with pytest.raises(ToolCallCut, match="cannot hold a call to code"):
        tool_call_schema(SHAPES["min length"], 40)  # its minLength is kept


CUT = '{"name": "kb_search", "arguments": {"query": "a_id_a_id_a_id_a_id'


def answer(text: str, finish: str) -> ChatResult:
    return ChatResult(text=text, usage=Usage(30, 64), model="gemma", finish_reason=finish)


def test_a_held_call_cut_at_its_cap_says_so_with_the_cap_and_the_setting_to_raise():
    with pytest.raises(ToolCallCut) as cut:
        text_calls(answer(CUT, "length"), KB_TOOLS, required=True, held=True, cap=64)
    message = str(cut.value)
    assert "cut at its output cap of 64 tokens" in message and "raise the output cap" in message
    assert "raise output_caps.judge" in str(cut.value.naming("output_caps.judge"))
    assert "unparseable" not in message and cut.value.cap == 64


def test_a_tool_call_block_cut_at_its_cap_is_cut_not_unparseable():
    block = "<tool_call>\n" + CUT + "\n</tool_call>"  # the in-process backend closes the tag
    with pytest.raises(ToolCallCut, match="cut at its output cap of 64 tokens"):
        text_calls(answer(block, "length"), KB_TOOLS, required=True, cap=64)
    # not at the cap: a broken block is unparseable, as before
    with pytest.raises(InvalidResponse, match="unparseable tool call") as broken:
        text_calls(answer(block, "stop"), KB_TOOLS, required=True, cap=64)
    assert not isinstance(broken.value, ToolCallCut)


def test_a_required_answer_that_ran_out_before_any_call_is_cut():
    prose = "Well, the first thing to know about heat is"
    with pytest.raises(ToolCallCut, match="raise the output cap of the call"):
        text_calls(answer(prose, "length"), KB_TOOLS, required=True)
    # an answer that stopped on its own without a call is left to the caller (not forced)
    assert text_calls(answer(prose, "stop"), KB_TOOLS, required=True).text == prose
    # offered, not required: an answer cut at its cap is just a cut answer
    assert text_calls(answer(prose, "length"), KB_TOOLS).text == prose


class CutBackend(ScriptedBackend):
    """Answers with a call cut at its cap (`finish_reason` length), as llama-server does."""

    async def chat(self, messages, **kwargs):  # type: ignore[no-untyped-def, override]
        result = await super().chat(messages, **kwargs)
        return replace(result, finish_reason="length")


async def test_the_budgeted_call_names_the_roles_cap_for_a_held_call_cut_there():
    backend = CutBackend("gemma", CUT)
    backend.supports_json_schema = True
    with pytest.raises(ToolCallCut) as cut:
        await budgeted_call(
            CouncilContext(output_caps={"judge": 300}),
            role="judge",
            agent="judge",
            backend=backend,
            contents=[text_section("task", "Which filament survives heat?")],
            compose=lambda s: [{"role": "user", "content": s["task"]}],
            question="Which filament survives heat?",
            tools=KB_TOOLS,
            tool_choice="required",
        )
    assert "output cap of 300 tokens" in str(cut.value)
    assert "raise output_caps.judge" in str(cut.value)
    # the schema the server was held to is the bounded one, fitted to that cap
    sent = backend.kwargs[0]["json_schema"]
    assert sent == tool_call_schema(KB_TOOLS, 300)
    # a cap too small for any call is refused before sending, with the role's setting named
    with pytest.raises(ToolCallCut, match="cannot hold a call to kb_search.*output_caps.judge"):
        await budgeted_call(
            CouncilContext(output_caps={"judge": 40}),
            role="judge",
            agent="judge",
            backend=backend,
            contents=[text_section("task", "Which filament survives heat?")],
            compose=lambda s: [{"role": "user", "content": s["task"]}],
            question="Which filament survives heat?",
            tools=KB_TOOLS,
            tool_choice="required",
        )
    assert len(backend.kwargs) == 1
