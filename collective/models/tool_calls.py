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

from collective.errors import InvalidResponse
from collective.models.base import ChatResult, ToolCall

__all__ = ["parse_tool_calls", "text_calls", "tool_call_schema"]

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


def tool_call_schema(tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one call to any of `tools` (OpenAI shape): `{"name", "arguments"}`.

    An answer constrained to it is a call (`tool_choice="required"` kept by structured output,
    on any backend that has it).
    """
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "name": {"const": tool["function"]["name"]},
                    "arguments": tool["function"].get("parameters") or {"type": "object"},
                },
                "required": ["name", "arguments"],
            }
            for tool in tools
        ]
    }


def text_calls(
    result: ChatResult, tools: Sequence[dict[str, Any]], *, required: bool = False
) -> ChatResult:
    """`result` with calls to `tools` written as text read as calls (a server's parser missed them).

    Args:
        result: An answer to a request that offered `tools`.
        tools: The tools offered (OpenAI shape).
        required: The answer was held to `tool_call_schema(tools)`: it must be a call.

    Raises:
        InvalidResponse: A `<tool_call>` block is not valid JSON, or a `required` answer is not
            a call to one of `tools` (e.g. cut by the token cap).
    """
    if result.tool_calls:  # the server parsed them itself
        return result
    names = [t["function"]["name"] for t in tools]
    rest, calls = parse_tool_calls(result.text, result.model, names)
    if not calls:
        if required:
            raise InvalidResponse(
                f"{result.model} was held to a tool call but wrote {result.text[:200]!r} "
                f"(finish: {result.finish_reason})"
            )
        return result
    return replace(result, text=rest, tool_calls=calls, finish_reason="tool_calls")
