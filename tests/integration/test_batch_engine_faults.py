"""The batch engine's faults reach the requests they hit, and what it adds: scores, lookup.

A llama.cpp decode that fails (a fault that cannot be caused on demand: `llama_decode` is made
to fail once) ends every request in that batch with the error, not every other one; a request
that fails while it is admitted (its sampler cannot be built: made to fail once) gets the error
while the worker lives on and later requests are answered. Score requests on one question
compute it once; prompt lookup drafts tokens from the prompt, only while its request decodes
alone, and leaves the answer as it was.
Each runs on the real gemma model.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import need_llama_cpp

from collective.errors import InvalidResponse
from collective.models.batch_engine import BatchEngine, Generation, GenerationRequest
from collective.models.llamacpp_in_process import acquire_model, release_model

pytestmark = pytest.mark.integration

WAIT_S = 300  # generous: the machine may be busy; a hung request never returns at all


@pytest.fixture
def engine(gguf_path: Path) -> Iterator[BatchEngine]:
    need_llama_cpp()
    model = acquire_model(gguf_path)
    engine = BatchEngine(model, n_ctx=1024, n_batch=128, n_threads=2, n_seq_max=4)
    try:
        yield engine
    finally:
        engine.close()
        release_model(model)


class Call:
    """`engine.generate(request)` on a daemon thread (a hung one must not hold pytest)."""

    def __init__(self, engine: BatchEngine, request: GenerationRequest) -> None:
        self.result: Generation | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        threading.Thread(target=self._run, args=(engine, request), daemon=True).start()

    def _run(self, engine: BatchEngine, request: GenerationRequest) -> None:
        try:
            self.result = engine.generate(request)
        except BaseException as error:  # noqa: BLE001 - the test reads it
            self.error = error
        finally:
            self.done.set()

    def wait(self) -> Call:
        assert self.done.wait(WAIT_S), "the request never returned: the engine hangs"
        return self


def prompt(engine: BatchEngine, text: str) -> list[int]:
    return engine.model.tokenize(text.encode(), add_bos=True, special=False)


def test_a_failed_decode_ends_every_request_in_the_batch(
    engine: BatchEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import llama_cpp

    real = llama_cpp.llama_decode
    failed = threading.Event()

    def decode_fails_once(ctx, batch):
        # the first step that decodes one token for each of the three requests fails
        if batch.n_tokens == 3 and not failed.is_set():
            failed.set()
            return -1
        return real(ctx, batch)

    monkeypatch.setattr(llama_cpp, "llama_decode", decode_fails_once)
    counting = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,"
    calls = [
        Call(engine, GenerationRequest(prompt(engine, f"{counting} {n}"), 200, temperature=0.0))
        for n in range(3)
    ]
    for call in calls:
        call.wait()
    assert failed.is_set()
    # every request of the failed batch failed; none ran on after its KV missed a step
    assert [type(c.error) for c in calls] == [InvalidResponse] * 3
    monkeypatch.setattr(llama_cpp, "llama_decode", real)
    after = Call(engine, GenerationRequest(prompt(engine, "One, two,"), 4, temperature=0.0))
    assert after.wait().result is not None and after.result.completion_tokens > 0


def test_a_request_that_fails_to_start_fails_alone_and_the_engine_serves_on(
    engine: BatchEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llama_cpp._internals import LlamaSampler

    real = LlamaSampler.add_penalties
    failures = iter([RuntimeError("no sampler for this request")])

    def add_penalties_fails_once(self, *args, **kwargs):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LlamaSampler, "add_penalties", add_penalties_fails_once)
    first = Call(engine, GenerationRequest(prompt(engine, "One, two,"), 4, temperature=0.0))
    assert isinstance(first.wait().error, RuntimeError)
    later = [
        Call(engine, GenerationRequest(prompt(engine, f"Count: {n},"), 4, temperature=0.0))
        for n in range(2)
    ]
    for call in later:
        assert call.wait().error is None
        assert call.result is not None and call.result.completion_tokens > 0


# -- what the engine adds: score requests and prompt lookup ----------------------------------


def test_score_requests_share_their_question_and_score_as_one_alone(engine: BatchEngine) -> None:
    question = prompt(engine, "Question: which filament survives a hot car? Passage:" * 4)
    texts = [f" passage {n}: ASA keeps its shape at {80 + n} C." for n in range(6)]
    passages = [engine.model.tokenize(t.encode(), add_bos=False, special=False) for t in texts]
    yes = engine.model.tokenize(b" yes", add_bos=False, special=False)[:1]
    no = engine.model.tokenize(b" no", add_bos=False, special=False)[:1]
    requests = [GenerationRequest(question + p, 0, score=(yes, no)) for p in passages]
    together = engine.generate_all(requests)
    assert [g.finish_reason for g in together] == ["score"] * 6
    assert all(g.completion_tokens == 0 and g.score is not None for g in together)
    # the question was computed once: every request but the first copied it
    assert sum(g.prompt_n for g in together) < 2 * len(question) + sum(map(len, passages))
    assert sum(g.cache_n >= len(question) - 1 for g in together) >= 5
    alone = engine.generate(requests[3])
    assert alone.score is not None and together[3].score is not None
    assert abs(alone.score - together[3].score) < 0.05  # batch shapes move logits a little


def test_prompt_lookup_drafts_from_the_prompt_and_keeps_the_answer(engine: BatchEngine) -> None:
    text = "ASA resists UV light, keeps its shape at 95 C and prints best in an enclosure. " * 3
    ids = prompt(engine, text)
    plain = engine.generate(GenerationRequest(ids, 40, temperature=0.0))
    engine._trim_cache()
    drafted = engine.generate(GenerationRequest(ids, 40, temperature=0.0, lookup=6))
    # The sampler decides every token, drafts or not; but a draft is verified in one step of
    # several rows, whose logits come from other kernels than one row alone, so a near tie
    # can break the other way later on another CPU (as in a batch: test_shared_prefix.py).
    # What holds anywhere: the answer starts as it does without drafts, and drafts were taken.
    assert drafted.text[:8] == plain.text[:8], (drafted.text, plain.text)
    assert drafted.drafted > 0 and 0 < drafted.accepted <= drafted.drafted
    assert 0 < drafted.completion_tokens <= 40


def test_prompt_lookup_drafts_nothing_beside_another_sequence(engine: BatchEngine) -> None:
    """On CPU a step of several rows costs nearly their sum: drafts pay only for a call alone."""
    text = "ASA resists UV light, keeps its shape at 95 C and prints best in an enclosure. " * 3
    ids = prompt(engine, text)
    plain = engine.generate(GenerationRequest(ids, 40, temperature=0.0))
    engine._trim_cache()
    writing = threading.Event()
    story = "Tell a long story about a printer farm, chapter after chapter, without stopping."
    other = GenerationRequest(
        prompt(engine, story), 400, temperature=1.0, seed=7, on_text=lambda _: writing.set()
    )
    beside = Call(engine, other)
    assert writing.wait(WAIT_S)
    drafted = engine.generate(GenerationRequest(ids, 40, temperature=0.0, lookup=6))
    still_writing = not beside.done.is_set()
    other.cancel.set()
    beside.wait()
    assert still_writing  # the lookup call never decoded alone
    assert drafted.drafted == 0 and drafted.accepted == 0
    assert drafted.text == plain.text


def test_a_model_loads_quietly_only_while_no_other_thread_silences_llama_cpp(
    gguf_path: Path,
) -> None:
    """A model load silences stdout as a context creation does: never both at once.

    Each swaps the process's stdout for the null device and puts back what it found; a load
    that began inside another thread's silence put that thread's (closed) null device back, and
    an eval's `--json` object went nowhere.
    """
    import os
    import sys

    from collective.models.batch_engine import quiet_native

    need_llama_cpp()
    before, descriptor = sys.stdout, os.fstat(1)
    loaded = threading.Event()

    def load() -> None:
        release_model(acquire_model(gguf_path, repack=False))  # a key of its own: a real load
        loaded.set()

    with quiet_native():
        threading.Thread(target=load, daemon=True).start()
        loaded_inside = loaded.wait(5)  # a load takes well under a second here
    assert loaded.wait(WAIT_S)
    assert not loaded_inside  # it waited for the other thread's silence to end
    assert sys.stdout is before
    after = os.fstat(1)
    assert (after.st_dev, after.st_ino) == (descriptor.st_dev, descriptor.st_ino)
