"""How sure a model was of its own answer, read from the log-probabilities of its tokens.

Every backend that can report the log-probability of each token it chose hands the list to
`token_confidence`, the one place it becomes a `Confidence`: the mean over the answer's tokens
and the lowest mean of any `WINDOW` consecutive tokens (the answer's least sure stretch, as
DeepConf's "lowest group confidence"). The log-probabilities are the model's own, before
sampling (a softmax over the raw logits): the in-process engine computes them from the logits of
the token it sampled, llama-server returns the same with `logprobs` (`n_probs`). A backend that
cannot report them gives None and says why (`ChatResult.confidence_note`); no value stands in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_CONFIDENT_AT",
    "WINDOW",
    "Confidence",
    "confidence_fields",
    "is_confident",
    "token_confidence",
]

WINDOW = 12
"""Tokens in the sliding window of `Confidence.lowest`: about a clause, so one unsure figure or
name shows, while a single odd token among sure ones does not decide it."""


@dataclass(frozen=True)
class Confidence:
    """The log-probabilities (natural log, each <= 0) of the tokens an answer was written with."""

    mean: float
    """Mean log-probability per token."""
    lowest: float
    """The lowest mean of `window` consecutive tokens, never above `mean` (an answer shorter
    than the window is one window: its mean)."""
    tokens: int
    """Tokens read (an answer's content tokens the backend reported)."""
    window: int = WINDOW

    def to_dict(self) -> dict[str, Any]:
        """Plain data for state and `--json` (rounded: four decimals say all there is)."""
        return {
            "mean": round(self.mean, 4),
            "lowest": round(self.lowest, 4),
            "tokens": self.tokens,
            "window": self.window,
        }


def token_confidence(logprobs: Iterable[float | None], window: int = WINDOW) -> Confidence | None:
    """The `Confidence` of an answer from its tokens' log-probabilities; None without any.

    Values that are not finite numbers (a server's null or NaN) are left out; a log-probability
    above 0 (float rounding of a sure token) counts as 0.

    Args:
        logprobs: One per token, in order.
        window: Tokens per window of the lowest stretch.
    """
    values = [
        min(0.0, float(v))
        for v in logprobs
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    ]
    if not values:
        return None
    mean = math.fsum(values) / len(values)
    spans = range(len(values) - window + 1)
    lowest = min((math.fsum(values[i : i + window]) / window for i in spans), default=mean)
    return Confidence(mean=mean, lowest=min(lowest, mean), tokens=len(values), window=window)


DEFAULT_CONFIDENT_AT = -1.0
"""The `adaptive` mode's threshold on `Confidence.lowest` where the settings name none: its
least sure stretch of tokens averaged at least e^-1 (0.37) per token. Provisional: `collective
eval` chooses one on the bundled questions' tuning half (`collective.evaluation.adaptive`)."""


def is_confident(fields: Mapping[str, Any] | None, threshold: float) -> bool:
    """Whether an answer's `confidence_fields` say it is sure enough to stand alone.

    An answer without a confidence (its backend cannot say) is never confident: the samples
    run, as without adaptive answering.
    """
    confidence = (fields or {}).get("confidence")
    return confidence is not None and float(confidence["lowest"]) >= threshold


def confidence_fields(confidence: Confidence | None, note: str | None) -> dict[str, Any]:
    """`confidence` (a dict, or None) and, where there is none, `confidence_note` saying why."""
    if confidence is not None:
        return {"confidence": confidence.to_dict()}
    return {
        "confidence": None,
        "confidence_note": note or "this backend reports no token log-probabilities",
    }
