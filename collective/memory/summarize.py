"""Summarizers for memory compression: deterministic extractive by default, pluggable.

A summarizer is any callable `(text, max_tokens) -> summary`. The default,
`ExtractiveSummarizer`, keeps whole sentences chosen by cue words (decisions, causes, results),
identifiers and position, in their original order: the same input always gives the same
summary, and every word of it appeared in the input. An LLM summarizer (a backend call wrapped
in the same signature) can replace it; `TieredMemory` still cuts whatever comes back to
`max_tokens` and checks that nothing that must survive was lost.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from collective.budget.counting import ChatMessage, TokenCounter
from collective.errors import CollectiveError

if TYPE_CHECKING:
    from collective.models.base import Backend

__all__ = ["SUMMARY_PROMPT", "ExtractiveSummarizer", "Summarizer", "backend_summarizer"]

_log = logging.getLogger(__name__)

SUMMARY_PROMPT = (
    "Summarize the conversation excerpt below for a colleague who will continue the work. "
    "Keep decisions and their reasons, results, errors, file names, identifiers and numbers "
    "exactly; drop small talk. Answer with the summary only, in at most {max_tokens} tokens."
)

Summarizer = Callable[[str, int], str]
"""`(text, max_tokens) -> summary` of at most `max_tokens` tokens."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\s*\n+\s*")
_CUES = re.compile(
    r"\b(?:decid\w*|decision|agreed|chose|chosen|because|therefore|so that|result\w*|"
    r"conclu\w*|fix\w*|broke\w*|error\w*|fail\w*|must|cause[sd]?|found|root|next|todo|"
    r"outcome|answer\w*|recommend\w*|use[sd]?)\b",
    re.IGNORECASE,
)
_IDENTIFIER = re.compile(r"\d|`|\b[\w-]+\.\w{1,4}\b|\[[^\]]+\]|#\w+")


class ExtractiveSummarizer:
    """Picks the most informative whole sentences that fit, kept in their original order.

    Scores: 2 per cue word (decided, because, result, error...), 1 for any identifier, number,
    file name or tag, 2 for the first sentence and 1 for the last. Ties go to earlier sentences.

    Args:
        counter: Counts tokens (the model's own counter, so the budget is exact).
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def __call__(self, text: str, max_tokens: int) -> str:
        """Summarize `text` in at most `max_tokens` tokens."""
        if max_tokens <= 0:
            return ""
        text = text.strip()
        # Counting a long text only to learn it does not fit is the dominant cost; a text over
        # 8 characters per allowed token will not fit any tokenizer's prose (at worst, a text
        # that would have fitted gets summarized: still within budget).
        if len(text) <= 8 * max_tokens and self.counter.count(text) <= max_tokens:
            return text
        sentences = [s for s in _SENTENCE_END.split(text) if s.strip()]
        last = len(sentences) - 1
        scores = [
            2 * len(_CUES.findall(s))
            + (1 if _IDENTIFIER.search(s) else 0)
            + (2 if i == 0 else 1 if i == last else 0)
            for i, s in enumerate(sentences)
        ]
        chosen, used, misses = [], 0, 0
        for i in sorted(range(len(sentences)), key=lambda i: (-scores[i], i)):
            # Full, or nearly (several sentences in a row did not fit): the rest need no count.
            if used >= max_tokens - 2 or misses >= 8:
                break
            cost = self.counter.count(sentences[i]) + 1
            if used + cost <= max_tokens:
                chosen.append(i)
                used, misses = used + cost, 0
            else:
                misses += 1
        if not chosen:  # even the best sentence is too long: keep its beginning
            best = min(range(len(sentences)), key=lambda i: (-scores[i], i))
            return self.counter.head(sentences[best], max_tokens)
        summary = " ".join(sentences[i] for i in sorted(chosen))
        if self.counter.count(summary) > max_tokens:  # joins can merge tokens differently
            summary = self.counter.head(summary, max_tokens)
        return summary


def backend_summarizer(
    backend: Backend,
    loop: asyncio.AbstractEventLoop,
    fallback: Summarizer,
    *,
    timeout: float = 120.0,
) -> Summarizer:
    """A summarizer that asks a model backend, for `TieredMemory(summarizer=...)`.

    Memory compression is synchronous while backends are async: run the memory calls in a
    worker thread (`await asyncio.to_thread(memory.add_turn, ...)`) and pass the event loop the
    backend lives on; each summary is scheduled on that loop and awaited from the worker.

    Args:
        backend: The model that writes summaries.
        loop: The running event loop that owns `backend`.
        fallback: Used when the backend fails or times out (usually `ExtractiveSummarizer`), so
            a model outage never stops a conversation.
        timeout: Seconds to wait for one summary.
    """

    def summarize(text: str, max_tokens: int) -> str:
        messages: list[ChatMessage] = [
            {"role": "system", "content": SUMMARY_PROMPT.format(max_tokens=max_tokens)},
            {"role": "user", "content": text},
        ]
        future = asyncio.run_coroutine_threadsafe(
            backend.chat(messages, max_tokens=max_tokens, temperature=0.0),
            loop,
        )
        try:
            return future.result(timeout).text.strip() or fallback(text, max_tokens)
        except (CollectiveError, TimeoutError) as exc:
            future.cancel()
            _log.warning(
                "summary by %s failed (%s); using the fallback",
                getattr(backend, "spec", backend),
                exc,
            )
            return fallback(text, max_tokens)

    return summarize
