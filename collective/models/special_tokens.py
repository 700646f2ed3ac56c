"""Untrusted text is never read as a special token.

A chat template puts each message's content between control tokens (`<start_of_turn>`,
`<|im_start|>`, `<eos>`, `[INST]`, ...), and servers tokenize the rendered prompt with
special-token parsing on: llama-server's chat path always does, and so does Ollama. Content that
holds the text of a control token would become that token, so a question, a KB chunk, a proposal
or a tool result could close its turn and write the model's.

* Over HTTP (llama-server, Ollama) content is escaped where the request body is built: a
  zero-width space (U+200B) goes after the opening `<` or `[` of anything shaped like a control
  token (`<...>` without whitespace inside, `[WORD]`), so it tokenizes as plain text. The body
  that is counted is the body that is sent, so counts and answers agree.
* In process, content is tokenized without special-token parsing instead
  (`GGUFChat.prompt_tokens`), so it reaches the model unchanged.
* Tool-call arguments an assistant turn carries are rendered by the template too; they are
  escaped on every backend, in process included (`escape_tool_calls`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, cast

from collective.budget.counting import ChatMessage

__all__ = ["ESCAPE", "escape_messages", "escape_specials", "escape_tool_calls"]

ESCAPE = "\u200b"
"""The zero-width space put after the opening character of special-token-shaped text."""

_SPECIAL_SHAPED = re.compile(
    f"<(?!{ESCAPE})(?=[^\\s<>]{{1,64}}>)"  # <eos>, <|im_start|>, </s>, <｜User｜>
    f"|\\[(?!{ESCAPE})(?=/?[A-Za-z][A-Za-z0-9_]{{1,40}}\\])"  # [INST], [/INST], [multimodal]
)


def escape_specials(text: str) -> str:
    """`text` with every special-token-shaped piece broken by `ESCAPE` (idempotent)."""
    return _SPECIAL_SHAPED.sub(lambda m: m.group(0) + ESCAPE, text)


def _escape_value(value: Any) -> Any:
    """`value` (a JSON value) with every string in it, keys too, escaped."""
    if isinstance(value, str):
        return escape_specials(value)
    if isinstance(value, dict):
        return {_escape_value(k): _escape_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape_value(v) for v in value]
    return value


def escape_tool_calls(message: ChatMessage) -> ChatMessage:
    """A copy of `message` whose tool calls' arguments are escaped.

    The template renders an assistant turn's tool calls into the prompt as well as its
    content, and their arguments are model output that may quote untrusted text (a judge's
    `kb_search` query copying the question). Arguments as JSON text stay valid JSON: the
    escape is a character inside its strings.
    """
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return message
    fixed = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and "arguments" in function:
            function = {**function, "arguments": _escape_value(function["arguments"])}
            call = {**call, "function": function}
        fixed.append(call)
    return cast(ChatMessage, {**message, "tool_calls": fixed})


def escape_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Copies of `messages` with their content (text or text parts) and tool calls escaped."""
    out: list[ChatMessage] = []
    for message in messages:
        copy: dict[str, Any] = dict(escape_tool_calls(message))
        content = copy.get("content")
        if isinstance(content, str):
            copy["content"] = escape_specials(content)
        elif isinstance(content, list):
            copy["content"] = [
                {**part, "text": escape_specials(part["text"])}
                if isinstance(part, dict) and isinstance(part.get("text"), str)
                else part
                for part in content
            ]
        out.append(cast(ChatMessage, copy))
    return out
