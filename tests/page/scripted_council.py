"""The scripted OpenAI-protocol server of the Agent Server tests, answering from its prompts.

Each answer is the first sentence of a chunk of its prompt with that chunk's tag (`member-b`
takes the second chunk shown, the others the first), so the verdict cites a chunk that supports
it, whatever the KB's scores say. Latency, faults and the counts of open (`in_flight`) and
dropped calls are `ScriptedOpenAIServer`'s.
"""

from __future__ import annotations

import functools
import re

from tests.agent_server.scripted_openai import ScriptedOpenAIServer

CHUNK = re.compile(r"\[KB#([^\]\s]+)\] \[Score: [\d.]+\] (?:[^\n:]*: )?([^\n]*?[.!?])(?=\s|$)")
"""A chunk as prompts show it (`collective.kb.citations.format_chunk`): its tag, its heading
and the first sentence of its body."""

MODELS = ("member-a", "member-b", "judge")


def reply(model: str, prompt: str) -> str:
    """What `model` answers to `prompt`: a shown chunk's first sentence, cited."""
    found = CHUNK.findall(prompt)
    if not found:
        return "The knowledge base shows nothing on this."
    chunk_id, sentence = found[1] if model == "member-b" and len(found) > 1 else found[0]
    return f"{sentence} [KB#{chunk_id}]"


class ScriptedCouncilServer(ScriptedOpenAIServer):
    """`ScriptedOpenAIServer` serving `MODELS`, each answering with `reply`."""

    def __init__(
        self,
        latency_s: float = 1.0,
        latency: dict[str, float] | None = None,
        n_ctx: int = 8192,
        failing: tuple[str, ...] = (),
    ) -> None:
        replies = {m: functools.partial(reply, m) for m in MODELS}
        super().__init__(latency_s, n_ctx, replies, latency or {}, failing)
