"""One llama.cpp context that serves concurrent requests: shared prefixes, one batch.

The K members of a council arrive together (LangGraph `Send` tasks) with prompts that share a
long prefix (`collective.prompts.council`). `BatchEngine` owns one llama context and a worker
thread; every request is one *sequence* in that context:

* **Prefix sharing.** A new request starts from the longest common token prefix it has with a
  sequence already in the KV (a member running, or the last finished call, e.g. the
  planner's): those cells are copied into its own sequence id (`llama_memory_seq_cp`, which
  shares the cells, not copies them) and only the rest of its prompt is computed. A request
  whose prefix another request is still computing waits for it rather than computing it twice.
* **One batch.** Each step decodes the next token of every generating sequence and a chunk of
  any prompt still being read in one `llama_batch` with per-sequence ids; each sequence samples
  with its own chain (temperature, seed, repetition penalty, grammar).
* **Streaming and cancel.** Text reaches each request's `on_text` as it is written; setting a
  request's `cancel` ends its sequence only, at the next step.
* **Prompt lookup.** A request with `lookup` drafts up to that many tokens each step from its
  own prompt and output (llama-cpp-python's `LlamaPromptLookupDecoding`: the text after an
  earlier occurrence of its last n-gram) and decodes them with its sampled token; each is kept
  while the sampler, run on the row before it, picks it. Every token is still the sampler's
  choice (a greedy answer is the one without drafts; a sampled one is drawn from the same
  distributions, though batch shapes move logits slightly): a verdict that quotes its chunks
  writes several tokens per step. It drafts only while its sequence is the engine's only work:
  on CPU cores a step of several rows costs nearly their sum, so drafts beside other sequences
  cost more than they save (bench/README.md, "Judge speculation").
* **Confidence.** Each generated token's log-probability under the model (a log-softmax of the
  raw logits at its row, before penalties, grammar and temperature, as llama-server's
  `logprobs`) is kept (`Generation.logprobs`): what `collective.models.confidence` reads.
* **Scores.** A request with `score` generates nothing: it reads its prompt and returns the
  log-odds of one set of next tokens over another (a reranker's yes/no) at the prompt's last
  token. Score requests on one question share its prefix like any others (`generate_all`).
* **Cells.** Admission is the context's cells: a request is admitted when its uncached prompt
  and its whole output fit beside what the running requests hold and may still write; else it
  waits (idle cached sequences are dropped first). A finished request's sequence is kept as
  the prefix cache only while it is the most recent; older ones are removed
  (`llama_memory_seq_rm`), freeing the cells no other sequence shares.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from collective.errors import InvalidResponse

if TYPE_CHECKING:
    from llama_cpp import LlamaGrammar
    from llama_cpp._internals import LlamaModel

__all__ = ["BatchEngine", "Generation", "GenerationRequest", "TextStream", "sampling_seed"]

WAIT_FOR_PREFIX = 32
"""A request waits for another one to finish computing a common prefix when that saves more
than this many tokens; shorter shared pieces are computed again rather than waited for."""

LAST_N = 64
"""Tokens the repetition penalty looks back on (llama-cpp-python's `last_n_tokens_size`)."""


def sampling_seed() -> int:
    """The seed `Llama.create_completion` samples with when given none (its default seed)."""
    import llama_cpp

    return random.Random(llama_cpp.LLAMA_DEFAULT_SEED).randint(0, 2**32)


def _held_back(text: bytes, markers: Sequence[bytes]) -> int:
    """Bytes at the end of `text` that may be the start of one of `markers`."""
    held = 0
    for marker in markers:
        for n in range(min(len(marker), len(text)), held, -1):
            if text.endswith(marker[:n]):
                held = n
                break
    return held


class TextStream:
    """An answer's text as tokens arrive: stop strings, held-back ends, streaming.

    Text reaches `on_text` as soon as it is final: an incomplete UTF-8 character, or an end
    that may still become a stop string, waits for the next token; from the first `hold`
    string on (a tool call, parsed whole later) nothing more is handed out.
    """

    def __init__(
        self,
        stop: Sequence[str] = (),
        hold: Sequence[str] = (),
        on_text: Callable[[str], None] | None = None,
    ) -> None:
        self.stops = [s.encode("utf-8") for s in stop if s]
        self.holds = [s.encode("utf-8") for s in hold if s]
        self.on_text = on_text
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        self.data = b""
        self.sent = 0
        self.held = False

    def push(self, piece: bytes) -> bool:
        """Add one token's bytes; True when a stop string ended the answer (text cut there)."""
        self.data += piece
        hits = [self.data.index(s) for s in self.stops if s in self.data]
        if hits:
            self.data = self.data[: min(hits)]
            return True
        return False

    def flush(self) -> None:
        """Hand out what is final so far (between tokens)."""
        if self.on_text is None or self.held:
            return
        end = len(self.data) - _held_back(self.data, self.stops + self.holds)
        marks = [self.data.index(h) for h in self.holds if h in self.data]
        if marks:
            end, self.held = min(marks), True
        piece = self.decoder.decode(self.data[self.sent : end])
        self.sent = max(self.sent, end)
        if piece:
            self.on_text(piece)

    def close(self) -> str:
        """Hand out the rest (up to a hold string) and return the whole text."""
        if self.on_text is not None and not self.held:
            marks = [self.data.index(h) for h in self.holds if h in self.data]
            end = min(marks, default=len(self.data))
            piece = self.decoder.decode(self.data[self.sent : end], final=True)
            if piece:
                self.on_text(piece)
        return self.data.decode("utf-8", errors="ignore")


_QUIET = threading.RLock()


@contextlib.contextmanager
def quiet_native() -> Iterator[None]:
    """llama.cpp's native output silenced while a model or a context is made, one at a time.

    llama-cpp-python's `suppress_stdout_stderr` swaps the process's stdout and stderr, file
    descriptors and `sys.stdout` both, and puts back what it found: two at once (an eval's
    arms made their contexts together; a model loaded while a context was made) left both on
    the null device, so `collective ask --json` printed nothing and exited 0. Every load and
    context creation goes through here (`LlamaModel` silences itself too: nested, in one
    thread, each puts back what it found).
    """
    from llama_cpp._utils import suppress_stdout_stderr

    with _QUIET, suppress_stdout_stderr(disable=False):
        yield


@dataclass
class GenerationRequest:
    """One completion: the prompt's token ids and how to sample after them."""

    ids: list[int]
    max_tokens: int
    temperature: float = 0.2
    repeat_penalty: float = 1.0
    grammar: LlamaGrammar | None = None
    stop: Sequence[str] = ()
    hold: Sequence[str] = ()
    on_text: Callable[[str], None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    seed: int | None = None
    """None: `sampling_seed()`, so answers equal `Llama.create_completion`'s."""
    lookup: int = 0
    """Draft tokens per step by prompt lookup (0: none)."""
    score: tuple[Sequence[int], Sequence[int]] | None = None
    """(yes ids, no ids): generate nothing; `Generation.score` is log P(yes) - log P(no) of the
    token after the prompt (log-sum-exp over each set)."""


@dataclass(frozen=True)
class Generation:
    """What one request produced."""

    text: str
    completion_tokens: int
    """Tokens generated (the end-of-generation token not included)."""
    finish_reason: str
    """`stop`, `length` or `cancelled`."""
    prompt_tokens: int
    cache_n: int
    """Prompt tokens reused from the KV (a prefix shared with another sequence)."""
    prompt_n: int
    """Prompt tokens computed for this request."""
    queued_ms: float
    """Time spent waiting for room or for a shared prefix before the first computation."""
    drafted: int = 0
    """Tokens drafted by prompt lookup."""
    accepted: int = 0
    """Drafted tokens kept (each one a decode step saved)."""
    score: float | None = None
    """A score request's log-odds (`GenerationRequest.score`); None for a generation."""
    logprobs: tuple[float, ...] = ()
    """Each generated token's log-probability under the model's raw logits, in order."""
    tokens: tuple[int, ...] = ()
    """The generated token ids, in order (the end-of-generation token not included)."""


class _Segment:
    """Cells one sequence computed itself, from position `start` on (for cell accounting)."""

    __slots__ = ("start",)

    def __init__(self, start: int) -> None:
        self.start = start


@dataclass
class _Seq:
    """One sequence id in the KV and the tokens its cells hold (positions 0..len-1)."""

    id: int
    tokens: list[int]
    chain: list[tuple[_Segment, int, int]]
    """The cells it refers to: (segment, start, end) ranges covering positions 0..len-1; its
    own segment, once it computed anything, is the last."""
    own: _Segment | None = None
    used: int = 0
    """When it was last used (the engine's clock), for the cache's order."""

    def extend(self, tokens: Sequence[int]) -> None:
        """Record `tokens` computed into this sequence's own cells."""
        n = len(self.tokens)
        if self.own is None:
            self.own = _Segment(n)
            self.chain.append((self.own, n, n))
        segment, start, _ = self.chain[-1]
        self.chain[-1] = (segment, start, n + len(tokens))
        self.tokens.extend(tokens)


@dataclass(eq=False)
class _Job:
    request: GenerationRequest
    stream: TextStream
    submitted: float
    seq: _Seq | None = None
    pending: list[int] = field(default_factory=list)
    """Prompt tokens still to compute."""
    sampler: Any = None
    next_token: int | None = None
    """Sampled, streamed, not yet in the KV."""
    out: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    """One per token of `out`."""
    cache_n: int = 0
    started: float | None = None
    logit_index: int = -1
    draft: list[int] = field(default_factory=list)
    """Tokens drafted after `next_token` in the step being decoded."""
    drafted: int = 0
    accepted: int = 0
    score: float | None = None
    done: threading.Event = field(default_factory=threading.Event)
    result: Generation | None = None
    error: BaseException | None = None

    @property
    def reserved(self) -> int:
        """Cells this job may still add: its prompt's rest and the output it may still write."""
        return len(self.pending) + (self.request.max_tokens - len(self.out))


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class BatchEngine:
    """A llama context and the worker thread that serves every request on it.

    Args:
        model: The loaded model (llama-cpp-python's `LlamaModel`).
        n_ctx: KV cells for all sequences together (`kv_unified`: any one may use them all).
        n_batch: Tokens per decode step (prompt chunks plus one per generating sequence).
        n_threads: CPU threads for llama.cpp.
        n_seq_max: Sequences the context holds at once (requests running plus cached ones).
        keep_idle: Finished sequences kept as the prefix cache (the most recent first).
    """

    def __init__(
        self,
        model: LlamaModel,
        *,
        n_ctx: int,
        n_batch: int = 512,
        n_threads: int = 1,
        n_seq_max: int = 8,
        keep_idle: int = 1,
    ) -> None:
        import llama_cpp
        from llama_cpp._internals import LlamaContext

        self.model = model
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_batch
        params.n_threads = params.n_threads_batch = n_threads
        params.n_seq_max = n_seq_max
        params.kv_unified = True  # one pool of cells: shared prefixes are stored once
        params.swa_full = True  # sliding-window layers keep every cell: prefixes stay reusable
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED  # as `Llama`'s default
        params.no_perf = True
        with quiet_native():  # as `Llama(verbose=False)` loads quietly
            self._ctx = LlamaContext(model=model, params=params, verbose=False)
        self.n_ctx = llama_cpp.llama_n_ctx(self._ctx.ctx)
        self.n_batch = n_batch
        self.n_seq_max = n_seq_max
        self.keep_idle = keep_idle
        self._memory = llama_cpp.llama_get_memory(self._ctx.ctx)
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._n_vocab = model.n_vocab()
        self._cond = threading.Condition()
        self._queue: list[_Job] = []
        self._active: list[_Job] = []
        self._seqs: dict[int, _Seq] = {}
        self._clock = itertools.count()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.steps = 0
        """Decode steps run (for tests and benchmarks)."""
        self.max_batch_seqs = 0
        """The most sequences one step decoded together."""

    # -- the caller's side ------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> Generation:
        """Run one request to its end, blocking the calling thread (text streams meanwhile).

        Raises:
            InvalidResponse: llama.cpp failed to decode.
            RuntimeError: The engine was closed.
        """
        return self.generate_all([request])[0]

    def generate_all(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Run requests together to their ends (queued at once, in order), blocking the caller.

        Raises:
            InvalidResponse: llama.cpp failed to decode (the first failed request's error).
            RuntimeError: The engine was closed.
        """
        for request in requests:
            if len(request.ids) + max(request.max_tokens, 0) > self.n_ctx:
                raise ValueError(
                    f"{len(request.ids)} prompt + {request.max_tokens} output tokens exceed the "
                    f"context's {self.n_ctx} cells"
                )
        now = time.perf_counter()
        jobs = [_Job(r, TextStream(r.stop, r.hold, r.on_text), now) for r in requests]
        with self._cond:
            if self._closed:
                raise RuntimeError("the batch engine is closed")
            self._queue.extend(jobs)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="llama-batch", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        for job in jobs:
            job.done.wait()
        for job in jobs:
            if job.error is not None:
                raise job.error
        return [job.result for job in jobs if job.result is not None]

    def close(self) -> None:
        """Stop the worker (running requests end `cancelled`) and free the context."""
        with self._cond:
            self._closed = True
            for job in self._queue + self._active:
                job.request.cancel.set()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        import llama_cpp

        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        self._ctx.close()

    def used_cells(self) -> int:
        """KV cells the sequences hold (a shared prefix counted once)."""
        ends: dict[_Segment, int] = {}
        for seq in self._seqs.values():
            for segment, _, end in seq.chain:
                ends[segment] = max(ends.get(segment, 0), end)
        return sum(end - segment.start for segment, end in ends.items())

    # -- the worker ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._queue and not self._active:
                    self._cond.wait()
                if self._closed and not self._active and not self._queue:
                    return
                try:
                    self._admit()
                except BaseException as error:  # noqa: BLE001 - the worker must outlive it
                    self._fail_all(error)
                    continue
                if not self._active:
                    self._cond.wait(0.05)  # room or a prefix is on its way
                    continue
            try:
                self._step()
            except BaseException as error:  # noqa: BLE001 - handed to every caller
                with self._cond:
                    for job in list(self._active):  # `_finish` removes from the list
                        self._finish(job, error=error)

    def _fail_all(self, error: BaseException) -> None:
        """End every request, running or queued, with `error` (under the lock)."""
        for job in list(self._active):
            self._finish(job, error=error)
        for job in list(self._queue):
            self._queue.remove(job)
            self._finish(job, error=error)

    def _admit(self) -> None:
        """Start queued requests that have a sequence id and cells (in order; see module)."""
        for job in list(self._queue):
            if job.request.cancel.is_set():
                self._queue.remove(job)
                job.started = time.perf_counter()
                self._finish(job, reason="cancelled")
                continue
            plan = self._plan(job)
            if plan == "full":
                break  # no room: later requests must not overtake it
            if plan == "wait":
                continue  # waiting for a prefix another request is computing
            assert not isinstance(plan, str)
            source, shared = plan
            self._queue.remove(job)
            try:
                self._start(job, source, shared)
            except Exception as error:  # this request could not start: it fails, others run
                self._finish(job, error=error)

    def _plan(self, job: _Job) -> tuple[_Seq | None, int] | str:
        """Where `job` starts: (source sequence, tokens shared).

        `wait`: for a prefix another request is computing; `full`: no room now.
        """
        ids = job.request.ids
        limit = len(ids) - 1  # at least one token is computed, for its logits
        best: tuple[_Seq | None, int] = (None, 0)
        for seq in self._seqs.values():
            n = min(_common(seq.tokens, ids), limit)
            if n > best[1]:
                best = (seq, n)
        for other in self._active:
            if other.pending and other.seq is not None:
                target = other.seq.tokens + other.pending
                if min(_common(target, ids), limit) > best[1] + WAIT_FOR_PREFIX:
                    return "wait"
        while True:
            free = self.n_ctx - self.used_cells() - sum(j.reserved for j in self._active)
            need = len(ids) - best[1] + job.request.max_tokens
            if need <= free and len(self._seqs) < self.n_seq_max:
                return best
            idle = [s for s in self._seqs.values() if not any(j.seq is s for j in self._active)]
            if not idle:
                return "full"
            victim = min(idle, key=lambda s: (s is best[0], s.used))
            if victim is best[0] and best[1] > WAIT_FOR_PREFIX and self._active:
                return "full"  # a running request ends soon; its sequence keeps the prefix
            self._drop(victim)
            if victim is best[0]:
                best = (None, 0)

    def _start(self, job: _Job, source: _Seq | None, shared: int) -> None:
        import llama_cpp
        from llama_cpp._internals import LlamaSampler

        seq_id = next(i for i in range(self.n_seq_max) if i not in self._seqs)
        seq = _Seq(seq_id, [], [])
        if source is not None and shared:
            llama_cpp.llama_memory_seq_cp(self._memory, source.id, seq_id, 0, shared)
            seq.tokens = source.tokens[:shared]
            for segment, start, end in source.chain:
                if start < shared:
                    seq.chain.append((segment, start, min(end, shared)))
        self._seqs[seq_id] = seq
        job.seq, job.cache_n = seq, shared
        job.pending = job.request.ids[shared:]
        job.started = time.perf_counter()
        request = job.request
        sampler = job.sampler = LlamaSampler()  # closed by `_finish`, should this fail
        sampler.add_penalties(
            n_vocab=self._n_vocab,
            penalty_last_n=LAST_N,
            penalty_repeat=request.repeat_penalty,
            penalty_freq=0.0,
            penalty_present=0.0,
        )
        if request.grammar is not None:
            sampler.add_grammar(self.model, request.grammar)
        seed = sampling_seed() if request.seed is None else request.seed
        if request.temperature < 0:
            sampler.add_dist(seed)
        elif request.temperature == 0:
            sampler.add_greedy()
        else:  # `Llama`'s chain, so answers equal `create_completion`'s
            sampler.add_top_k(40)
            sampler.add_typical(1.0, 1)
            sampler.add_top_p(0.95, 1)
            sampler.add_min_p(0.05, 1)
            sampler.add_temp(request.temperature)
            sampler.add_dist(seed)
        self._active.append(job)
        if request.max_tokens <= 0 and request.score is None:
            self._finish(job, reason="length")

    def _step(self) -> None:
        """One decode: every generating sequence's next token and prompt chunks, together."""
        import llama_cpp

        with self._cond:
            for job in list(self._active):
                if job.request.cancel.is_set():
                    self._finish(job, reason="cancelled")
            jobs = list(self._active)
        if not jobs:
            return
        batch = self._batch
        n = 0
        added: list[tuple[_Job, list[int]]] = []

        def put(job: _Job, tokens: list[int], logits: int) -> None:
            """Add `tokens`; the last `logits` of them get logits (the first at logit_index)."""
            nonlocal n
            assert job.seq is not None
            pos = len(job.seq.tokens)
            for i, token in enumerate(tokens):
                batch.token[n] = token
                batch.pos[n] = pos + i
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = job.seq.id
                batch.logits[n] = i >= len(tokens) - logits
                n += 1
            if logits:
                job.logit_index = n - logits
            added.append((job, tokens))

        generating = [j for j in jobs if j.next_token is not None]
        room = self.n_batch - len(generating)
        alone = len(jobs) == 1  # drafts only pay where the step has nothing else to compute
        for job in generating:
            assert job.next_token is not None
            job.draft = self._draft(job, room) if alone else []
            room -= len(job.draft)
            put(job, [job.next_token, *job.draft], 1 + len(job.draft))
        for job in jobs:
            room = self.n_batch - n
            if job.pending and room > 0:
                chunk = job.pending[:room]
                put(job, chunk, int(len(chunk) == len(job.pending)))
        batch.n_tokens = n
        status = llama_cpp.llama_decode(self._ctx.ctx, batch)
        if status != 0:
            raise InvalidResponse(f"llama.cpp could not decode a batch of {n} tokens ({status})")
        self.steps += 1
        self.max_batch_seqs = max(self.max_batch_seqs, len(added))
        sampled: list[_Job] = []
        for job, tokens in added:
            assert job.seq is not None
            job.seq.extend(tokens)
            job.seq.used = next(self._clock)
            if job.next_token is not None and tokens == [job.next_token, *job.draft]:
                job.next_token = None
            else:
                del job.pending[: len(tokens)]
            if job.logit_index >= 0:
                sampled.append(job)
        for job in sampled:
            index, job.logit_index = job.logit_index, -1
            if job.request.score is not None:
                job.score = self._log_odds(index, *job.request.score)
                with self._cond:
                    self._finish(job, reason="score")
            else:
                self._sample(job, index)

    def _sample(self, job: _Job, index: int) -> None:
        """Sample `job`'s next token at batch row `index`, and on through the drafts it keeps."""
        draft, job.draft = job.draft, []
        tokens = [job.sampler.sample(self._ctx, index)]
        while len(tokens) <= len(draft) and tokens[-1] == draft[len(tokens) - 1]:
            tokens.append(job.sampler.sample(self._ctx, index + len(tokens)))
        kept = len(tokens) - 1  # drafts the sampler agreed with, in the KV already
        self._unwind(job, len(draft) - kept)
        job.drafted += len(draft)
        job.accepted += kept
        for i, token in enumerate(tokens):
            self._take(job, token, self._logprob(index + i, token))
            if job.done.is_set() or job.error is not None:
                return
            if i < kept:
                job.next_token = None  # decoded already, as a draft

    def _draft(self, job: _Job, room: int) -> list[int]:
        """Up to `job.request.lookup` tokens found after the last n-gram's earlier occurrence."""
        limit = min(job.request.lookup, room, job.request.max_tokens - len(job.out) - 1)
        if limit <= 0 or job.next_token is None:
            return []
        import numpy as np
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        ids = np.array([*job.request.ids, *job.out], dtype=np.intc)
        found = LlamaPromptLookupDecoding.find_candidate_pred_tokens(ids, 2, limit)
        return [int(t) for t in found]

    def _unwind(self, job: _Job, n: int) -> None:
        """Remove the last `n` tokens of `job`'s sequence (rejected drafts) from the KV."""
        if n <= 0:
            return
        import llama_cpp

        seq = job.seq
        assert seq is not None
        end = len(seq.tokens) - n
        llama_cpp.llama_memory_seq_rm(self._memory, seq.id, end, -1)
        del seq.tokens[end:]
        segment, start, _ = seq.chain[-1]
        seq.chain[-1] = (segment, start, end)

    def _log_odds(self, index: int, yes: Sequence[int], no: Sequence[int]) -> float:
        """Log P(yes) - log P(no) at batch row `index`, each a log-sum-exp over its tokens."""
        import llama_cpp
        import numpy as np

        row = llama_cpp.llama_get_logits_ith(self._ctx.ctx, index)
        logits = np.ctypeslib.as_array(row, shape=(self._n_vocab,)).astype(np.float64)

        def logsumexp(values: Any) -> float:
            top = float(values.max())
            return top + float(np.log(np.exp(values - top).sum()))

        return logsumexp(logits[list(yes)]) - logsumexp(logits[list(no)])

    def _logprob(self, index: int, token: int) -> float:
        """The log-probability of `token` under the raw logits at batch row `index`."""
        import llama_cpp
        import numpy as np

        row = llama_cpp.llama_get_logits_ith(self._ctx.ctx, index)
        logits = np.ctypeslib.as_array(row, shape=(self._n_vocab,))
        top = float(logits.max())
        total = float(np.exp(logits - top, dtype=np.float64).sum())
        return min(0.0, float(logits[token]) - top - float(np.log(total)))

    def _take(self, job: _Job, token: int, logprob: float) -> None:
        """A sampled token: end, stop or stream it, as `Llama.create_completion` would."""
        import llama_cpp

        if llama_cpp.llama_vocab_is_eog(self.model.vocab, token):
            with self._cond:
                self._finish(job, reason="stop")
            return
        job.out.append(token)
        job.logprobs.append(logprob)
        if job.stream.push(self.model.detokenize([token])):
            with self._cond:
                self._finish(job, reason="stop")
            return
        if len(job.out) >= job.request.max_tokens:
            with self._cond:
                self._finish(job, reason="length")
            return
        try:
            job.stream.flush()
        except Exception as error:  # the caller's on_text failed: end its request only
            with self._cond:
                self._finish(job, error=error)
            return
        job.next_token = token

    def _finish(self, job: _Job, *, reason: str = "", error: BaseException | None = None) -> None:
        """End a job (under the lock): hand over its result, keep or drop its sequence."""
        if job in self._active:
            self._active.remove(job)
        if job.sampler is not None:
            job.sampler.close()
            job.sampler = None
        if error is None:
            try:
                text = job.stream.close()
            except BaseException as exc:  # noqa: BLE001 - the caller's on_text failed
                error = exc
        if error is not None:
            job.error = error
            if job.seq is not None:
                self._drop(job.seq)
        else:
            started = job.started or time.perf_counter()
            job.result = Generation(
                text=text,
                completion_tokens=len(job.out),
                finish_reason=reason,
                prompt_tokens=len(job.request.ids),
                cache_n=job.cache_n,
                prompt_n=len(job.request.ids) - job.cache_n,
                queued_ms=(started - job.submitted) * 1000,
                drafted=job.drafted,
                accepted=job.accepted,
                score=job.score,
                logprobs=tuple(job.logprobs),
                tokens=tuple(job.out),
            )
            if job.seq is not None:
                job.seq.used = next(self._clock)
            self._trim_cache()
        job.done.set()
        self._cond.notify_all()

    def _trim_cache(self) -> None:
        """Keep the `keep_idle` most recently used idle sequences; drop the others."""
        busy = {id(j.seq) for j in self._active}
        idle = sorted((s for s in self._seqs.values() if id(s) not in busy), key=lambda s: -s.used)
        for seq in idle[self.keep_idle :]:
            self._drop(seq)

    def _drop(self, seq: _Seq) -> None:
        """Remove a sequence from the KV (cells it shares with others stay theirs)."""
        import llama_cpp

        if self._seqs.pop(seq.id, None) is not None:
            with contextlib.suppress(Exception):
                llama_cpp.llama_memory_seq_rm(self._memory, seq.id, -1, -1)
