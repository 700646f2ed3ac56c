"""The OpenAI chat-completions protocol as `collective serve` speaks it: requests, answers, errors.

What a client sends (`ChatRequest`) is read with pydantic: the messages, the model (a council in
an answer mode), `stream`, `user` (the thread, unless the `X-Collective-Thread` header names
one) and the extension object `collective` (`k`, `retrieval`, `thread`). Sampling parameters
(`temperature`, `max_tokens`, `tools`, ...) are the council's own business and are ignored.

What it gets back:

* the verdict as the assistant's `content`, and after it, readable, its sources and what the
  claim check did (`appendix`);
* the extension field `collective` (`COLLECTIVE_FIELD`): `thread`, `citations`, `claims`
  (`text`, `cited`, `status`, `reason`), `claim_check`, `unknown_citations`, `notes`, `mode`;
* `usage`: the tokens of every model call the council made;
* streamed, the members' progress as `reasoning_content` lines (the field reasoning models use,
  which chat clients show as "thinking" and never keep as the answer), then the checked verdict
  sentence by sentence, then a last chunk with `finish_reason`, the appendix, `collective` and
  `usage`.

Errors are OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from collective.kb.profile_names import Profile

__all__ = [
    "COLLECTIVE_FIELD",
    "ChatRequest",
    "ContentPart",
    "Message",
    "Options",
    "REASONING_FIELD",
    "appendix",
    "completion",
    "chunk",
    "error_body",
    "extension",
    "progress_line",
    "verdict_pieces",
]

COLLECTIVE_FIELD = "collective"
"""The extension field (request and answer) that carries what OpenAI's shape has no place for."""

REASONING_FIELD = "reasoning_content"
"""Where streamed progress goes: the delta field chat clients show as the model's thinking."""


class ContentPart(BaseModel):
    """One part of a message's content; only text parts are read."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        """The message's text (text parts joined).

        Raises:
            ValueError: A part that is not text (an image, audio, a file).
        """
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        kinds = {part.type for part in self.content} - {"text"}
        if kinds:
            raise ValueError(
                f"only text content is read; this message has {', '.join(sorted(kinds))} parts"
            )
        return "".join(part.text or "" for part in self.content)


class Options(BaseModel):
    """The request's `collective` extension object."""

    model_config = ConfigDict(extra="forbid")

    k: int | None = Field(default=None, ge=1, le=64)
    retrieval: Profile | None = None
    thread: str | None = Field(default=None, min_length=1, max_length=200)


class StreamOptions(BaseModel):
    """OpenAI's `stream_options`."""

    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(BaseModel):
    """A `POST /v1/chat/completions` body (unknown OpenAI parameters are accepted, unused)."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(default=None, max_length=200)
    n: int = Field(default=1, ge=1, le=1)
    collective: Options = Field(default_factory=Options)

    def question(self) -> str:
        """The last message, which must be the user's: the question."""
        last = self.messages[-1]
        if last.role != "user":
            raise ValueError(f"the last message is the {last.role}'s; end with the user's question")
        return last.text()

    def earlier(self) -> list[tuple[str, str]]:
        """The conversation before the question: user and assistant turns (others left out)."""
        return [(m.role, m.text()) for m in self.messages[:-1] if m.role in ("user", "assistant")]


def error_body(
    message: str, kind: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error object."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def extension(result: Mapping[str, Any], thread: str | None, mode: str) -> dict[str, Any]:
    """The `collective` field of an answer: citations, per-claim marks, the check, notes."""
    return {
        "thread": thread,
        "mode": mode,
        "citations": list(result.get("citations") or []),
        "unknown_citations": list(result.get("unknown_citations") or []),
        "claims": list(result.get("claims") or []),
        "claim_check": result.get("claim_check") or {},
        "citation_support": result.get("citation_support"),
        "notes": list(result.get("notes") or []),
        "answer_cut": bool(result.get("answer_cut")),
    }


_SHOWN = 100
"""The characters of a claim the readable marks repeat."""


def appendix(result: Mapping[str, Any]) -> str:
    """The readable end of an answer: its sources, and the mark of each claim the check kept.

    A claim the check dropped is counted, never quoted: its line is not the client's to keep
    (its text is in the `collective` field's `claims`, for a program that wants it).
    """
    lines = ["", "", "---"]
    citations = list(result.get("citations") or [])
    if citations:
        sources = (f"[KB#{c['id']}] {c.get('source', '')}".strip() for c in citations)
        lines.append("Sources: " + "; ".join(sources))
    else:
        lines.append("Sources: none (the verdict cites no KB chunk)")
    claims = list(result.get("claims") or [])
    kept = [c for c in claims if c["status"] != "dropped"]
    if kept:
        lines.append("Claims checked against the chunks they cite:")
    for claim in kept:
        text = " ".join(str(claim["text"]).split())
        short = text if len(text) <= _SHOWN else text[: _SHOWN - 1].rstrip() + "\u2026"
        lines.append(f"- [{claim['status']}] {short}")
    if dropped := len(claims) - len(kept):
        lines.append(f"Left out: {dropped} line(s) that no chunk shown to the judge supports.")
    if result.get("unknown_citations"):
        unknown = ", ".join(result["unknown_citations"])
        lines.append(f"Cited but never supplied (ignored): {unknown}")
    return "\n".join(lines)


_SENTENCE_END = re.compile(r"(?<=[.!?])[ \t]+")


def verdict_pieces(answer: str) -> Iterator[str]:
    """The checked verdict in the pieces it is streamed in: a sentence at a time.

    The pieces join to the verdict exactly (each keeps the spaces and line break after it).
    """
    for line in answer.splitlines(keepends=True):
        start = 0
        for end in _SENTENCE_END.finditer(line):
            yield line[start : end.end()]
            start = end.end()
        if start < len(line):
            yield line[start:]


def progress_line(event: Mapping[str, Any]) -> str | None:
    """One readable line for a run's event (None: not shown; tokens are counted, not shown)."""
    kind, node = event.get("type"), event.get("node")
    if kind == "progress":
        status = event.get("status")
        if status == "running":
            model = f" ({event['model']})" if event.get("model") else ""
            return f"{node}: running{model}"
        if status == "done":
            out = event.get("tokens_out")
            ms = event.get("ms")
            said = f", {out} tokens" if out is not None else ""
            took = ""
            if isinstance(ms, int | float):
                took = f" in {ms:.0f} ms" if ms < 1000 else f" in {ms / 1000:.1f} s"
            return f"{node}: done{said}{took}"
        if status == "failed":
            return f"{node}: failed: {event.get('error') or 'no answer'}"
        if status == "waiting" and event.get("message"):
            return f"{node}: waiting: {event['message']}"
        if status == "restored":
            return f"{node}: restored from the checkpoint"
        return None
    if kind in ("budget_event", "fault"):
        return f"{node}: {event.get('message')}"
    if kind == "note":
        return str(event.get("text"))
    if kind == "tool_call":
        return f"{node} checked {event.get('name')}({event.get('arguments')})"
    return None


def completion(
    completion_id: str,
    model: str,
    content: str,
    usage: Mapping[str, int],
    ext: Mapping[str, Any],
    finish_reason: str,
) -> dict[str, Any]:
    """A whole (non-streamed) `chat.completion`."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": dict(usage),
        COLLECTIVE_FIELD: dict(ext),
    }


def chunk(
    completion_id: str,
    model: str,
    delta: Mapping[str, Any] | None,
    *,
    finish_reason: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One `chat.completion.chunk` (`delta` None: a chunk with no choices, e.g. `usage`'s)."""
    choices = (
        []
        if delta is None
        else [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}]
    )
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        **extra,
    }
