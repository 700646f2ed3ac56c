"""Deep's reranker: an embedded chat model asked, per candidate, whether it answers the question.

No cross-encoder with weights ships on PyPI (bench/README.md), so deep reranks its best
candidates with the council's own judge model, Qwen2.5-Coder-1.5B-Instruct (embedded, in
process): a candidate's score is the log-odds of "yes" over "no" as the next token after

    Question: ... Does the passage below answer this question? Reply yes or no.
    Passage: <heading>: <text>

By default (`EngineReranker`) each candidate is a score request on the judge's in-process batch
engine: no context or weights of its own, the question computed once by prefix sharing, the
passages in the engine's shared batches. The setting `rerank = "embedded"` scores in a context of
its own instead (`LlmReranker`, on the same weights: `acquire_model`); `none` turns it off (the
test suite does: it loads a model). Scores are kept per (question, passage), so asking again
costs nothing. Both measured on the eval KB in bench/README.md.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from collective import environment
from collective.errors import ConfigError
from collective.kb.store import Chunk

if TYPE_CHECKING:
    from llama_cpp._internals import LlamaModel

    from collective.models.batch_engine import BatchEngine

__all__ = [
    "RERANK_MODEL",
    "EngineReranker",
    "LlmReranker",
    "configured_reranker",
    "lazy_reranker",
    "rerank_setting",
]

RERANK_MODEL = "qwen2.5-coder-1.5b"
"""The embedded model deep reranks with (`collective.models.embedded.EMBEDDED_MODELS`)."""

_OPEN = (
    "<|im_start|>system\nYou check search results for a materials knowledge base.<|im_end|>\n"
    "<|im_start|>user\nQuestion:"
)
_ASK = "\nDoes the passage below answer this question? Reply yes or no.\nPassage:"
_CLOSE = "<|im_end|>\n<|im_start|>assistant\n"
"""The prompt's own text (control tokens allowed), around the question and the passage, which
are untrusted and tokenized as plain text: a `<|im_end|>` in either stays characters."""
_PASSAGE_CHARS = 700
"""Characters of a candidate shown (a chunk is at most `MAX_CHUNK_CHARS`; most are shorter)."""
_SEQS = 16
"""Candidates decoded in one batch (one KV sequence each, plus the question's)."""


class _Remembered:
    """A reranker's scores kept per (question, passage): asking again costs nothing."""

    _known: dict[tuple[str, str], float]

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        raise NotImplementedError

    def rerank(self, query: str, chunks: Sequence[Chunk]) -> list[float]:
        """`scores` of the chunks, each shown as `heading: text` (known ones from memory)."""
        passages = [f"{c.heading}: {c.text}" if c.heading else c.text for c in chunks]
        todo = [p for p in dict.fromkeys(passages) if (query, p) not in self._known]
        if todo:
            if len(self._known) > 20_000:
                self._known.clear()
            self._known.update(zip(((query, p) for p in todo), self.scores(query, todo)))
        return [self._known[(query, p)] for p in passages]


class LlmReranker(_Remembered):
    """Yes/no log-odds of a GGUF chat model, for a question and its candidates.

    Args:
        path: The GGUF (ChatML template, as Qwen2.5's).
        n_threads: CPU threads for llama.cpp (default: as the embedded backends,
            `$COLLECTIVE_THREADS` or the cores this process may use).
    """

    def __init__(self, path: str | Path, n_threads: int | None = None) -> None:
        # First: it sets how llama.cpp's threads wait before the library loads.
        from collective.models.llamacpp_in_process import (
            acquire_model,
            default_threads,
            release_model,
        )

        import llama_cpp  # isort: skip
        from llama_cpp._internals import LlamaContext

        from collective.models.batch_engine import quiet_native

        # The weights the in-process backend holds for this file, when it has loaded them (the
        # judge's, in a council): loaded with its parameters, they are not loaded twice.
        self._model = acquire_model(path)
        try:
            ctx = llama_cpp.llama_context_default_params()
            ctx.n_ctx = 4096
            ctx.n_batch = 2048
            ctx.n_ubatch = 512  # a 2048-token step buffer took 1.2 GB
            threads = n_threads or default_threads()
            ctx.n_threads = ctx.n_threads_batch = threads
            ctx.n_seq_max = _SEQS + 1
            ctx.kv_unified = True  # the question's cells are shared by every candidate
            ctx.no_perf = True
            with quiet_native():
                self._ctx = LlamaContext(model=self._model, params=ctx, verbose=False)
        except BaseException:
            release_model(self._model)
            raise
        self._memory = llama_cpp.llama_get_memory(self._ctx.ctx)
        self._batch = llama_cpp.llama_batch_init(2048, 0, 1)
        self._vocab = self._model.n_vocab()
        self._lock = threading.Lock()
        self._closed = False
        self._known: dict[tuple[str, str], float] = {}
        self.yes = self._first_tokens(("yes", "Yes", " yes", " Yes"))
        self.no = self._first_tokens(("no", "No", " no", " No"))

    def close(self) -> None:
        """Free the context, and the model unless the backend (or another holder) still has it."""
        import llama_cpp

        from collective.models.llamacpp_in_process import release_model

        with self._lock:
            if self._closed:
                return
            self._closed = True
            llama_cpp.llama_batch_free(self._batch)
            self._ctx.close()
        release_model(self._model)

    def _tokens(self, text: str, special: bool = True) -> list[int]:
        return list(self._model.tokenize(text.encode("utf-8"), add_bos=False, special=special))

    def question_tokens(self, query: str) -> list[int]:
        """The shared part of every candidate's prompt: instructions and the question."""
        # A question is cut at 1,000 characters: it and a group of passages fit one batch.
        question = " " + " ".join(query.split())[:1000]
        return self._tokens(_OPEN) + self._tokens(question, special=False) + self._tokens(_ASK)

    def passage_tokens(self, passage: str) -> list[int]:
        """A candidate's own part: the passage, then the assistant's turn opened."""
        return self._tokens(" " + passage[:_PASSAGE_CHARS], special=False) + self._tokens(_CLOSE)

    def _first_tokens(self, words: Sequence[str]) -> list[int]:
        return sorted({self._tokens(w)[0] for w in words})

    def _decode(self, parts: list[tuple[list[int], int, int]]) -> list[int]:
        """Decode `(tokens, seq_id, first position)` parts in one batch: each last token's row."""
        import llama_cpp

        batch, rows, n = self._batch, [], 0
        for tokens, seq, start in parts:
            for i, token in enumerate(tokens):
                batch.token[n] = token
                batch.pos[n] = start + i
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = seq
                batch.logits[n] = i == len(tokens) - 1
                n += 1
            rows.append(n - 1)
        batch.n_tokens = n
        if llama_cpp.llama_decode(self._ctx.ctx, batch) != 0:
            raise RuntimeError("llama_decode failed while reranking")
        return rows

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        """The log-odds of "yes" for each passage (higher: more likely to answer `query`)."""
        import llama_cpp

        out: list[float] = []
        with self._lock:
            if self._closed:  # its model may be freed: no tokenizing either
                raise RuntimeError("the reranker is closed")
            prefix = self.question_tokens(query)
            llama_cpp.llama_memory_clear(self._memory, True)
            self._decode([(prefix, 0, 0)])
            start = 0
            while start < len(passages):
                group: list[list[int]] = []
                used = len(prefix)
                for passage in passages[start : start + _SEQS]:
                    tokens = self.passage_tokens(passage)
                    if group and used + len(tokens) > 2048:
                        break
                    group.append(tokens)
                    used += len(tokens)
                for seq in range(1, len(group) + 1):
                    llama_cpp.llama_memory_seq_rm(self._memory, seq, -1, -1)
                    llama_cpp.llama_memory_seq_cp(self._memory, 0, seq, -1, -1)
                rows = self._decode(
                    [(tokens, seq, len(prefix)) for seq, tokens in enumerate(group, 1)]
                )
                for row in rows:
                    logits = np.ctypeslib.as_array(
                        llama_cpp.llama_get_logits_ith(self._ctx.ctx, row), shape=(self._vocab,)
                    ).astype(np.float64)
                    out.append(_logsumexp(logits[self.yes]) - _logsumexp(logits[self.no]))
                start += len(group)
        return out


class EngineReranker(_Remembered):
    """Yes/no log-odds as score requests on a loaded model's batch engine (the judge's).

    Each candidate is one request (`GenerationRequest.score`) of the same prompt as
    `LlmReranker`'s; they are queued together, so the engine computes the question once and
    the passages in shared batches. No context or weights of its own: the engine is looked up
    on every call (`engine`), so a backend closed and made again is followed.

    Args:
        engine: Returns the engine to score on (loading its model if need be).
    """

    def __init__(self, engine: Callable[[], BatchEngine]) -> None:
        self._engine = engine
        self._known: dict[tuple[str, str], float] = {}

    def _tokens(self, model: LlamaModel, text: str, special: bool = True) -> list[int]:
        return list(model.tokenize(text.encode("utf-8"), add_bos=False, special=special))

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        """The log-odds of "yes" for each passage (higher: more likely to answer `query`)."""
        from collective.models.batch_engine import GenerationRequest

        engine = self._engine()
        model = engine.model
        question = " " + " ".join(query.split())[:1000]
        prefix = self._tokens(model, _OPEN) + self._tokens(model, question, special=False)
        prefix += self._tokens(model, _ASK)
        yes = sorted({self._tokens(model, w)[0] for w in ("yes", "Yes", " yes", " Yes")})
        no = sorted({self._tokens(model, w)[0] for w in ("no", "No", " no", " No")})
        requests = [
            GenerationRequest(
                prefix
                + self._tokens(model, " " + p[:_PASSAGE_CHARS], special=False)
                + self._tokens(model, _CLOSE),
                0,
                score=(yes, no),
            )
            for p in passages
        ]
        return [float(g.score or 0.0) for g in engine.generate_all(requests)]


def _logsumexp(values: np.ndarray) -> float:
    top = float(values.max())
    return top + float(np.log(np.exp(values - top).sum()))


def rerank_setting(setting: str | None = None) -> str:
    """The `rerank` setting: `setting`, else `$COLLECTIVE_RERANK`, else the default `engine`."""
    return setting or environment.rerank() or "engine"


def configured_reranker(
    setting: str | None = None,
) -> Callable[[str, Sequence[Chunk]], list[float]] | None:
    """Deep's reranker on `RERANK_MODEL`, as the `rerank` setting says (None: the environment).

    `engine` (the default): `EngineReranker`, score requests on the in-process backend's engine
    for that model (the judge's, in the default council); `embedded`: `LlmReranker`, a context
    of its own on the shared weights; `none`: no reranker.
    `$COLLECTIVE_EMBEDDED_MODEL` (one model for every embedded spec) applies here too.

    Raises:
        ConfigError: The setting is none of those.
    """
    name = _checked(setting)
    if name == "none":
        return None
    if name == "engine":
        return _engine_reranker().rerank
    return _embedded_reranker().rerank


def lazy_reranker(
    setting: str | None = None,
) -> Callable[[str, Sequence[Chunk]], list[float]] | None:
    """The reranker `setting` names, checked now and made at its first call (None for `none`).

    A retrieval that does not rerank (lean, balanced) loads nothing.

    Raises:
        ConfigError: The setting is none of `engine`, `embedded`, `none`.
    """
    name = _checked(setting)
    if name == "none":
        return None

    def rerank(query: str, chunks: Sequence[Chunk]) -> list[float]:
        reranker = configured_reranker(name)
        return reranker(query, chunks) if reranker is not None else []

    return rerank


def _checked(setting: str | None) -> str:
    name = rerank_setting(setting)
    if name not in ("engine", "embedded", "none"):
        raise ConfigError(
            f"unknown {environment.RERANK_ENV} {name!r}; use embedded, engine or none "
            "(the setting rerank)"
        )
    return name


@functools.cache  # one per process: its scores are kept between retrievals
def _engine_reranker() -> EngineReranker:
    from collective.models.llamacpp_in_process import LlamaCppBackend
    from collective.models.registry import backend_from_spec

    def engine() -> BatchEngine:
        # Looked up on every call: the registry makes the backend again after `close_all`.
        backend = backend_from_spec(f"embedded:{RERANK_MODEL}")
        if not isinstance(backend, LlamaCppBackend):
            raise ConfigError(f"embedded:{RERANK_MODEL} is not an in-process backend")
        return backend.engine

    return EngineReranker(engine)


def _embedded_reranker() -> LlmReranker:
    from collective.models.embedded import embedded_model, embedded_model_path

    # Keyed by the file: `$COLLECTIVE_EMBEDDED_MODEL` read now, as the judge's backend reads it.
    return _reranker_on(embedded_model_path(embedded_model(f"embedded:{RERANK_MODEL}").key))


@functools.cache
def _reranker_on(path: Path) -> LlmReranker:
    return LlmReranker(path)
