"""Entailment by the judge's own model: does this passage support this claim?

What numbers and names cannot settle (a negation, a property in other words) is asked of the
judge's model as deep's reranker asks it of passages (`collective.kb.rerank`): the log-odds of
"yes" over "no" as the next token after

    Claim: ... Does the passage below support this claim? Reply yes or no.
    Passage: <heading>: <text as the judge was shown it>

All pairs of one claim are decoded together on a copy of the claim's tokens, in one batch. It
runs in process on the judge's GGUF (its weights shared with the judge's backend) when that
model speaks ChatML (Qwen's template); for any other judge there is none, and the claim check
says so.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collective.kb.rerank import RERANK_MODEL, LlmReranker
from collective.verdict.support import Entail

__all__ = ["embedded_entailment", "entailment_for"]

_OPEN = (
    "<|im_start|>system\nYou check whether a knowledge-base passage supports a claim, word for "
    "word: names, numbers and negations must agree.<|im_end|>\n<|im_start|>user\nClaim:"
)
_ASK = "\nDoes the passage below support this claim? Reply yes or no.\nPassage:"


class _Entailment(LlmReranker):
    """`LlmReranker` asking about a claim instead of a question."""

    def question_tokens(self, query: str) -> list[int]:
        """The shared part of every pair: instructions and the claim (as plain text)."""
        claim = " " + " ".join(query.split())[:1000]
        return self._tokens(_OPEN) + self._tokens(claim, special=False) + self._tokens(_ASK)

    def pairs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Log-odds for each `(claim, passage)`, the passages of one claim in one batch."""
        by_claim: dict[str, list[int]] = {}
        for n, (claim, _) in enumerate(pairs):
            by_claim.setdefault(claim, []).append(n)
        out = [0.0] * len(pairs)
        for claim, rows in by_claim.items():
            for n, score in zip(rows, self.scores(claim, [pairs[r][1] for r in rows]), strict=True):
                out[n] = score
        return out


@functools.cache
def _scorer(path: str) -> _Entailment:
    return _Entailment(path)


def entailment_for(backend: Any) -> Entail | None:
    """Entailment on `backend`'s model: an in-process GGUF with a ChatML template; else None."""
    from collective.models.llamacpp_in_process import LlamaCppBackend, gguf_vocab_counter

    if not isinstance(backend, LlamaCppBackend) or not backend.path.is_file():
        return None
    if "<|im_start|>" not in (gguf_vocab_counter(str(backend.path)).chat.template or ""):
        return None
    path = str(backend.path)
    return lambda pairs: _scorer(path).pairs(pairs)  # its context is made when first asked


def embedded_entailment() -> Entail:
    """Entailment on the embedded judge model (`RERANK_MODEL`, the 1.5B)."""
    from collective.models.embedded import embedded_model, embedded_model_path

    path = Path(embedded_model_path(embedded_model(f"embedded:{RERANK_MODEL}").key))
    return _scorer(str(path)).pairs
