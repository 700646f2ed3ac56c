"""Tool calls written as text, and the schema that makes an answer one call.

Hermes-style `<tool_call>` blocks and bare JSON calls are read where no server parses calls for
us (in process) and where a server's parser missed one (a forced call held to `tool_call_schema`
comes back from llama-server as bare JSON).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from collective.errors import InvalidResponse, ToolCallCut
from collective.models.base import ChatResult, ToolCall

__all__ = ["MAX_ITEMS", "MAX_STRING", "parse_tool_calls", "text_calls", "tool_call_schema"]

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
"""A Hermes-style tool call in generated text (the closing tag may be cut by a stop)."""
FENCED_CALL = re.compile(r"^\s*(?:```(?:json)?\s*)?(\{.*\})\s*(?:```)?\s*$", re.DOTALL)
"""A bare or fenced JSON call, as small Qwen models often write it (llama.cpp's Hermes parser
accepts it too): taken as a call only when its `name` is an offered tool."""


def _json_object(raw: str) -> Any:
    """`raw` as JSON, or `{{...}}` with one brace layer off.

    Models copy the doubled braces from templates that show the call format that way
    (Qwen2.5-Coder's GGUF template does).
    """
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        if raw.startswith("{{") and raw.endswith("}}"):
            return json.loads(raw[1:-1])
        raise


def _call_from_json(raw: str, model: str) -> tuple[str, dict[str, Any]]:
    try:
        data = _json_object(raw)
        name, arguments = data["name"], data.get("arguments", {})
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise TypeError("name must be a string and arguments an object")
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise InvalidResponse(
            f"{model} wrote an unparseable tool call {raw[:200]!r}: {exc}"
        ) from None
    return name, arguments


def parse_tool_calls(
    text: str, model: str, names: Sequence[str] = ()
) -> tuple[str, list[ToolCall]]:
    """Split Hermes-style `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks off.

    An answer that is nothing but one JSON object (bare or in a code fence) naming one of
    `names` is a call too.

    Returns:
        The text outside the calls, and the calls in order (ids `call_0`, `call_1`, ...).

    Raises:
        InvalidResponse: A `<tool_call>` block is not a JSON object with a string `name` and
            object `arguments`.
    """
    blocks = [m.group(1) for m in TOOL_CALL.finditer(text)]
    if blocks:
        calls = [_call_from_json(raw, model) for raw in blocks]
        rest = TOOL_CALL.sub("", text).strip()
    else:
        fenced = FENCED_CALL.match(text)
        try:
            data = _json_object(fenced.group(1)) if fenced else None
        except json.JSONDecodeError:
            data = None
        if not (isinstance(data, dict) and data.get("name") in names):
            return text, []
        calls, rest = [_call_from_json(fenced.group(1), model)], ""  # type: ignore[union-attr]
    return rest, [ToolCall(f"call_{n}", name, args) for n, (name, args) in enumerate(calls)]


MAX_STRING = 200
"""The longest string a held call may write where its tool's schema sets no `maxLength`."""
MAX_ITEMS = 16
"""The most items an array in a held call may have where its tool's schema sets no `maxItems`."""
_GAP = 1
"""Whitespace bytes llama.cpp's grammar allows after each token of JSON (llama-cpp-python's
converter: one optional space; llama-server's allows up to 22, see docs/tool-calls.md)."""
_CHAR = 6
"""Bytes one character of a JSON string can take in the grammar (`\\uXXXX`; UTF-8 needs 4)."""
_SCALAR_BYTES = {"integer": 17, "number": 52, "boolean": 5, "null": 4}
"""The longest value of each JSON scalar type the grammar allows (16 digits, a sign, ...)."""


def _bounded(schema: Any, longest: int) -> Any:
    """`schema` bounded: strings, arrays and objects.

    Every string at most `longest` characters (or its own shorter `maxLength`, never below its
    `minLength`), every array at most `MAX_ITEMS` items (or its own `maxItems`), every object
    closed (`additionalProperties` false: only its own properties).
    """
    if not isinstance(schema, dict):
        return schema
    out = {
        key: (
            {k: _bounded(v, longest) for k, v in value.items()}
            if key == "properties" and isinstance(value, dict)
            else [_bounded(v, longest) for v in value]
            if key in ("anyOf", "oneOf") and isinstance(value, list)
            else _bounded(value, longest)
            if key == "items"
            else value
        )
        for key, value in schema.items()
    }
    kind = schema.get("type")
    if kind == "string":
        out["maxLength"] = max(
            min(schema.get("maxLength", MAX_STRING), longest), schema.get("minLength", 0)
        )
    elif kind == "array":
        out["maxItems"] = min(schema.get("maxItems", MAX_ITEMS), MAX_ITEMS)
    elif kind == "object" or "properties" in schema:
        out.setdefault("properties", {})
        out["additionalProperties"] = False
    return out


def _worst_bytes(schema: Any) -> float:
    """The most bytes of JSON (trailing whitespace included) the grammar for `schema` allows.

    Infinite where this does not know how llama.cpp bounds it (`pattern`, `$ref`, ...).
    """
    if not isinstance(schema, dict) or {"pattern", "format", "$ref", "allOf"} & set(schema):
        return float("inf")
    if "const" in schema:
        return len(json.dumps(schema["const"]).encode()) + _GAP
    if "enum" in schema:
        return max((len(json.dumps(v).encode()) for v in schema["enum"]), default=0) + _GAP
    if "anyOf" in schema or "oneOf" in schema:
        return max((_worst_bytes(s) for s in schema.get("anyOf") or schema["oneOf"]), default=0)
    kind = schema.get("type")
    if kind == "string" and "maxLength" in schema:
        return 2 + _CHAR * schema["maxLength"] + _GAP
    if isinstance(kind, str) and kind in _SCALAR_BYTES:
        return _SCALAR_BYTES[kind] + _GAP
    if kind == "array" and "maxItems" in schema:
        n = schema["maxItems"]
        return 2 + 2 * _GAP + n * _worst_bytes(schema.get("items", {})) + max(n - 1, 0) * (1 + _GAP)
    if schema.get("additionalProperties") is False:  # `{` kv (`,` kv)* `}`, kv: "key" : value
        kvs = [
            len(json.dumps(k).encode()) + 1 + 2 * _GAP + _worst_bytes(v)
            for k, v in schema.get("properties", {}).items()
        ]
        return 2 + 2 * _GAP + sum(kvs) + max(len(kvs) - 1, 0) * (1 + _GAP)
    return float("inf")


def _one_call(tool: dict[str, Any], longest: int) -> dict[str, Any]:
    """The schema of a call to `tool` with its strings at most `longest` characters."""
    parameters = tool["function"].get("parameters") or {"type": "object"}
    return _bounded(
        {
            "type": "object",
            "properties": {"name": {"const": tool["function"]["name"]}, "arguments": parameters},
            "required": ["name", "arguments"],
        },
        longest,
    )


def _fitting_call(tool: dict[str, Any], max_tokens: int | None) -> dict[str, Any]:
    """`_one_call` with the longest string bound whose worst case fits `max_tokens`."""

    def fits(longest: int) -> bool:  # with the end-of-generation token
        return max_tokens is None or _worst_bytes(_one_call(tool, longest)) + 1 <= max_tokens

    if fits(MAX_STRING) or _worst_bytes(_one_call(tool, 0)) == float("inf"):
        return _one_call(tool, MAX_STRING)  # fits, or unbounded in a way strings do not change
    if not fits(0):
        needed = int(_worst_bytes(_one_call(tool, 0))) + 1
        raise ToolCallCut(
            f"an output cap of {max_tokens} tokens cannot hold a call to "
            f"{tool['function']['name']} (even with empty strings it can take up to {needed})",
            cap=max_tokens or 0,
        )
    low, high = 0, MAX_STRING  # fits(low), not fits(high + 1)
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return _one_call(tool, low)


def tool_call_schema(
    tools: Sequence[dict[str, Any]], max_tokens: int | None = None
) -> dict[str, Any]:
    """The JSON schema of one call to any of `tools` (OpenAI shape): `{"name", "arguments"}`.

    An answer constrained to it is a call (`tool_choice="required"` kept by structured output,
    on any backend that has it). It is bounded, so the grammar built from it always closes:
    every string has a `maxLength` (its tool's own, at most `MAX_STRING`), every array a
    `maxItems`, every object no properties but its own. With `max_tokens`, strings are
    shortened further until the longest call the grammar allows, in bytes, fits the cap with
    its end-of-generation token (every token writes at least one byte).

    Args:
        tools: The tools offered.
        max_tokens: The call's output cap in tokens; None bounds strings by schema only.

    Raises:
        ToolCallCut: `max_tokens` cannot hold a call to one of `tools` even with empty strings.
    """
    calls = [_fitting_call(tool, max_tokens) for tool in tools]
    return {"anyOf": calls}


def _cut(result: ChatResult, cap: int | None) -> ToolCallCut:
    """The error for a tool call `result` stopped at its output cap (`finish_reason` length)."""
    cap_n = cap if cap is not None else result.usage.completion_tokens
    return ToolCallCut(
        f"{result.model}'s tool call was cut at its output cap of {cap_n} tokens before it "
        f"closed ({result.text[:120]!r}...)",
        cap=cap_n,
    )


def text_calls(
    result: ChatResult,
    tools: Sequence[dict[str, Any]],
    *,
    required: bool = False,
    held: bool = False,
    cap: int | None = None,
) -> ChatResult:
    """`result` with calls to `tools` written as text read as calls (a server's parser missed them).

    Args:
        result: An answer to a request that offered `tools`.
        tools: The tools offered (OpenAI shape).
        required: The request asked for a call (`tool_choice="required"`).
        held: The answer was held to `tool_call_schema(tools)`: it must be a call.
        cap: The call's output cap in tokens, named when a call was cut there.

    Raises:
        ToolCallCut: A call was cut at the output cap (`finish_reason` length): a
            `<tool_call>` block that does not parse, or a `required` answer that is no call.
        InvalidResponse: A `<tool_call>` block is not valid JSON, or a `held` answer is not
            a call to one of `tools`.
    """
    if result.tool_calls:  # the server parsed them itself
        return result
    names = [t["function"]["name"] for t in tools]
    cut = result.finish_reason == "length"
    try:
        rest, calls = parse_tool_calls(result.text, result.model, names)
    except InvalidResponse:
        if cut:
            raise _cut(result, cap) from None
        raise
    if not calls:
        if cut and (required or held):
            raise _cut(result, cap)
        if held:
            raise InvalidResponse(
                f"{result.model} was held to a tool call but wrote {result.text[:200]!r} "
                f"(finish: {result.finish_reason})"
            )
        return result
    return replace(result, text=rest, tool_calls=calls, finish_reason="tool_calls")
