"""The council reads its shared prompt once (issue 25).

* Every member's prompt is the same token ids up to its own part, on all three backends: in
  process (the GGUF's tokenizer and template), the real llama-server (`/apply-template`,
  `/tokenize`) and the Ollama-protocol server (Ollama's own template).
* In process the members run together on the batch engine: the shared prefix is computed once
  (the others copy it: `cache_n`), a prefix left in the KV by the call before (the planner's)
  is reused, a member's greedy answer in the batch equals its answer alone, cancelling one
  member leaves the others whole, and on random prompts and K the engine never holds more
  cells than its context.
* Ollama reports what it reused (`prompt_eval_cached_count`), and the budget report carries it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from conftest import (
    OLLAMA_MODEL,
    ServerProcess,
    need_llama_cpp,
    serve_llama_server,
    serving_llama_server,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collective import agents
from collective.budget.assembly import AssembledPrompt, assemble
from collective.budget.trimming import Scored
from collective.budgeted_call import fit_plan
from collective.errors import QuorumError
from collective.graph import CouncilContext, build_graph
from collective.kb.citations import format_chunk, tag
from collective.kb.store import Chunk
from collective.models.base import Backend, ChatDelta, ChatResult, collect
from collective.models.batch_engine import GenerationRequest
from collective.models.llamacpp_in_process import GEMMA_TEMPLATE, LlamaCppBackend
from collective.models.ollama_api import OllamaBackend
from collective.nodes.specialist import member_sections
from collective.prompts import council
from collective.prompts import specialist as prompt
from tests.fakes import ListStore, ScriptedBackend

pytestmark = pytest.mark.integration

K = 3
QUESTION = "Which filament should I use for a part that sits in a hot car, and why?"
PLAN = "Specialist 1: heat. Specialist 2: UV. Specialist 3: printing ease."
CHUNKS = [
    Chunk(f"mem_{i:02d}", f"{name} softens near {temp} C; {note}", f"{name.lower()}.md", (), s)
    for i, (name, temp, note, s) in enumerate(
        [
            ("ASA", 95, "it resists UV and keeps its shape in a closed car in summer.", 0.9),
            ("ABS", 98, "it warps on large prints without an enclosure.", 0.8),
            ("PETG", 80, "it is easy to print and tough, but creeps under load.", 0.7),
            ("PLA", 55, "it deforms on a dashboard within hours.", 0.6),
            ("PC", 110, "it needs a hot nozzle and an enclosure.", 0.5),
        ]
    )
]
SETTINGS = CouncilContext(k=K, output_caps={"specialist": 24})


def scored() -> list[Scored]:
    return [Scored(c.id, format_chunk(c), c.score, mark=tag(c.id)) for c in CHUNKS]


async def member_prompts(backend: Backend, question: str = QUESTION) -> list[AssembledPrompt]:
    """The K members' prompts as the specialist node assembles them for `backend`."""
    n_ctx = await backend.context_window()
    counter = await backend.token_counter()
    plan, _ = fit_plan(SETTINGS, "specialist", backend, n_ctx)
    return [
        await asyncio.to_thread(
            assemble,
            plan,
            counter,
            member_sections(question, PLAN, "", scored(), member, K),
            prompt.compose,
            node=member,
            model=backend.model,
        )
        for member in agents.members(K)
    ]


def common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def own_part_start(text: str) -> int:
    return text.rindex(council.OWN_PART)


def check_shared(renders: list[str], ids: list[list[int]], tokenize) -> int:
    """Every member's ids agree up to (the tokens of) the rendered text before its own part."""
    prefixes = {r[: own_part_start(r)] for r in renders}
    assert len(prefixes) == 1  # identical in rendered template text
    (prefix,) = prefixes
    n = len(tokenize(prefix))
    assert n > 200
    for other in ids[1:]:
        # identical in token ids (the join before `## Your part` may merge a token)
        assert common(ids[0], other) >= n - 1
    return n


# -- in process -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def in_process(gguf_path: Path) -> LlamaCppBackend:
    need_llama_cpp()
    return LlamaCppBackend(gguf_path, n_ctx=4096, chat_template=GEMMA_TEMPLATE)


@pytest.fixture
async def backend(in_process: LlamaCppBackend) -> AsyncIterator[LlamaCppBackend]:
    yield in_process
    in_process.engine._trim_cache()


async def test_member_prompts_share_their_prefix_in_process(backend: LlamaCppBackend) -> None:
    prompts = await member_prompts(backend)
    chat = await backend._loaded()
    renders = [chat.render(p.messages)[0] for p in prompts]
    ids = [chat.prompt_tokens(p.messages)[0] for p in prompts]
    check_shared(renders, ids, lambda text: chat.model.tokenize(text.encode(), False, True))
    # the same KB chunks for every member (the task is sized alike)
    assert len({tuple(p.kept("kb_chunks")) for p in prompts}) == 1


async def alone(backend: LlamaCppBackend, prompts: list[AssembledPrompt]) -> list[ChatResult]:
    out = []
    for p in prompts:
        backend.engine._trim_cache()  # nothing shared with the member before
        for seq in list(backend.engine._seqs.values()):
            backend.engine._drop(seq)
        out.append(await backend.chat(p.messages, max_tokens=24, temperature=0.0))
    return out


async def test_the_engine_reads_the_shared_prefix_once_and_batches_members(
    backend: LlamaCppBackend,
) -> None:
    prompts = await member_prompts(backend)
    single = await alone(backend, prompts)
    assert all(r.usage.cached_tokens == 0 for r in single)
    engine = backend.engine
    for seq in list(engine._seqs.values()):
        engine._drop(seq)
    engine.max_batch_seqs = 0
    together = await asyncio.gather(
        *(backend.chat(p.messages, max_tokens=24, temperature=0.0) for p in prompts)
    )
    assert engine.max_batch_seqs == K  # decoded together in one batch
    chat = await backend._loaded()
    ids = [chat.prompt_tokens(p.messages)[0] for p in prompts]
    shared = min(common(ids[0], other) for other in ids[1:])
    longest = max(len(i) for i in ids)
    # the prefix was computed once, by one member; the others copied it
    computed = [int(r.timings["prompt_n"]) for r in together]
    assert sum(computed) <= longest + (K - 1) * (longest - shared)
    assert sum((r.usage.cached_tokens or 0) >= shared for r in together) == K - 1
    # Greedy in a batch, a member's logits come from batched matmuls (other kernels and sums
    # than one sequence alone), so a near tie can break the other way later in an answer
    # (measured: bench/README.md). What is stable: every member starts as it does alone, and
    # most members' whole answers agree.
    for batched, solo in zip(together, single, strict=True):
        assert batched.text[:8] == solo.text[:8], (batched.text, solo.text)
    assert sum(b.text == s.text for b, s in zip(together, single, strict=True)) >= K - 1


async def test_a_prefix_left_by_the_call_before_is_reused(backend: LlamaCppBackend) -> None:
    prompts = await member_prompts(backend)
    chat = await backend._loaded()
    planner = [
        prompts[0].messages[0],
        {
            "role": "user",
            "content": prompts[0].messages[-1]["content"].split(council.OWN_PART)[0]
            + "## Your part\nYou are the planner.",
        },
    ]
    await backend.chat(planner, max_tokens=4, temperature=0.0)
    member = await backend.chat(prompts[1].messages, max_tokens=4, temperature=0.0)
    expected = common(chat.prompt_tokens(planner)[0], chat.prompt_tokens(prompts[1].messages)[0])
    assert expected > 200
    assert member.usage.cached_tokens == expected


async def test_cancelling_one_member_leaves_the_others_whole(backend: LlamaCppBackend) -> None:
    prompts = await member_prompts(backend)
    single = await alone(backend, prompts)
    first_piece = asyncio.Event()

    def on_delta(delta: ChatDelta) -> None:
        first_piece.set()

    async def run(i: int) -> ChatResult:
        stream = backend.stream(prompts[i].messages, max_tokens=24, temperature=0.0)
        return await collect(stream, on_delta if i == 1 else None)

    tasks = [asyncio.create_task(run(i)) for i in range(K)]
    await asyncio.wait_for(first_piece.wait(), timeout=300)
    tasks[1].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[1], asyncio.CancelledError)
    assert [r.text for i, r in enumerate(results) if i != 1] == [  # type: ignore[union-attr]
        r.text for i, r in enumerate(single) if i != 1
    ]
    assert not backend.engine._active


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    k=st.integers(1, 5),
    shared=st.integers(0, 150),
    own=st.lists(st.integers(1, 60), min_size=5, max_size=5),
    out=st.lists(st.integers(1, 12), min_size=5, max_size=5),
    seed=st.integers(0, 2**16),
)
def test_the_batch_holds_the_invariant_on_random_prompts(
    in_process: LlamaCppBackend, k: int, shared: int, own: list[int], out: list[int], seed: int
) -> None:
    """K requests (a random shared prefix, random own parts and outputs) on a context too small
    for all of them at once: each finishes, its prompt is whole (reused + computed), and the
    cells held plus those reserved never exceed the context."""
    engine = in_process.engine
    rng = random.Random(seed)
    words = [rng.randrange(1000, 20000) for _ in range(shared)]
    requests = [
        GenerationRequest(
            words + [rng.randrange(1000, 20000) for _ in range(own[i])], out[i], temperature=0.0
        )
        for i in range(k)
    ]
    peak = 0
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        while not done.is_set():
            with engine._cond:
                held = engine.used_cells() + sum(j.reserved for j in engine._active)
            peak = max(peak, held)
            await asyncio.sleep(0.005)

    async def main() -> list:
        watcher = asyncio.create_task(watch())
        try:
            return await asyncio.gather(*(asyncio.to_thread(engine.generate, r) for r in requests))
        finally:
            done.set()
            await watcher

    results = asyncio.run(main())
    for request, result in zip(requests, results, strict=True):
        assert result.cache_n + result.prompt_n == len(request.ids)
        assert result.completion_tokens <= request.max_tokens
        assert result.finish_reason in ("stop", "length")
    assert peak <= engine.n_ctx


async def test_a_specialist_timeout_in_a_batch_is_recorded_as_before(
    in_process: LlamaCppBackend,
) -> None:
    """Members that run out of time on the engine keep what they wrote (`partial`) or fail
    with the timeout, and their sequences end."""
    ctx = CouncilContext(
        k=K,
        planner=ScriptedBackend("planner", PLAN),
        specialists=[in_process],
        judge=ScriptedBackend("judge", "ASA [KB#mem_00]"),
        knowledge=ListStore(CHUNKS),
        retrieval="lean",
        judge_tools=False,
        specialist_timeout_s=2.0,
        output_caps={"specialist": 2000},
        temperature=0.8,
    )
    try:
        out = await build_graph().ainvoke({"question": QUESTION}, context=ctx)
        proposals = out["proposals"]
    except QuorumError as error:
        proposals = error.proposals
    assert len(proposals) == K
    for p in proposals:
        assert p.get("partial") or "gave no answer within 2 s" in (p["error"] or ""), p
    for _ in range(600):
        if not in_process.engine._active:
            break
        await asyncio.sleep(0.1)
    assert not in_process.engine._active


# -- llama-server -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def swa_full_server(llama_server_binary: str, gguf_path: Path) -> Iterator[ServerProcess]:
    """Two 2,048-token slots; `--swa-full`: without it llama-server reuses little of a cached
    prompt of gemma's sliding-window layers (measured: 135 of 440 prefix tokens)."""
    yield from serving_llama_server(
        llama_server_binary, gguf_path, "-c", "4096", "-np", "2", "--swa-full", name="swa-full"
    )


async def test_member_prompts_share_their_prefix_on_llama_server(
    swa_full_server: ServerProcess,
) -> None:
    from collective.models.llama_server import LlamaServerBackend

    llama_server = swa_full_server
    backend = LlamaServerBackend(llama_server.url)
    try:
        prompts = await member_prompts(backend)
        async with httpx.AsyncClient(base_url=llama_server.url, timeout=60) as client:

            async def tokenize(text: str) -> list[int]:
                body = {"content": text, "add_special": False, "parse_special": True}
                return (await client.post("/tokenize", json=body)).json()["tokens"]

            renders = [
                (await client.post("/apply-template", json={"messages": p.messages})).json()[
                    "prompt"
                ]
                for p in prompts
            ]
            ids = [await tokenize(r) for r in renders]
            prefix = renders[0][: own_part_start(renders[0])]
            prefix_ids = await tokenize(prefix)
        check_shared(renders, ids, lambda text: prefix_ids)
        # one after another: the later members land on the warm slot and reuse the prefix
        results = [await backend.chat(p.messages, max_tokens=4, temperature=0.0) for p in prompts]
        assert all((r.timings.get("cache_n") or 0) >= len(prefix_ids) - 1 for r in results[1:]), [
            r.timings for r in results
        ]
    finally:
        await backend.aclose()


async def test_after_before_fan_out_members_on_other_slots_reuse_the_prefix(
    swa_full_server: ServerProcess,
) -> None:
    # Concurrent members on slots that did not read the prefix computed it again (measured with
    # K = 3: 1,828, 0 and 0 tokens reused). `before_fan_out` gets the slot holding it saved in
    # the server's host prompt cache, from which a member on another slot loads it.
    from collective.models.llama_server import LlamaServerBackend

    backend = LlamaServerBackend(swa_full_server.url)
    try:
        # a question of its own: nothing earlier tests left in the slots or the cache shares it
        first, *members = await member_prompts(backend, "Which glue bonds PETG to TPU outdoors?")
        alone = await backend.chat(first.messages, max_tokens=4, temperature=0.0)
        await backend.before_fan_out()
        results = await asyncio.gather(
            *(backend.chat(p.messages, max_tokens=4, temperature=0.0) for p in members[:2])
        )
    finally:
        await backend.aclose()
    reused = [r.timings.get("cache_n") or 0 for r in results]
    # most of each prompt is the shared prefix (only `## Your part` differs)
    assert all(n >= alone.usage.prompt_tokens // 2 for n in reused), reused


async def test_before_fan_out_leaves_a_single_slot_alone(
    llama_server_binary: str, gguf_path: Path
) -> None:
    # One slot and no host cache: the one-token request would take the planner's own slot and
    # its prompt would be lost, so the member after it would compute the prefix again.
    from collective.models.llama_server import LlamaServerBackend

    args = ("-c", "2048", "-np", "1", "--swa-full", "--cache-ram", "0")
    server = serve_llama_server(llama_server_binary, gguf_path, *args, name="one-slot")
    backend = LlamaServerBackend(server.url)
    try:
        first, member, *_ = await member_prompts(backend, "Which resin cures under water?")
        alone = await backend.chat(first.messages, max_tokens=4, temperature=0.0)
        await backend.before_fan_out()
        after = await backend.chat(member.messages, max_tokens=4, temperature=0.0)
    finally:
        await backend.aclose()
        server.stop()
    assert (after.timings.get("cache_n") or 0) >= alone.usage.prompt_tokens // 2


# -- Ollama -------------------------------------------------------------------------------------


async def test_member_prompts_share_their_prefix_on_ollama(
    ollama_server: ServerProcess, gguf_path: Path
) -> None:
    import ollama_protocol_server as ollama_wire

    from collective.models.llamacpp_in_process import gguf_vocab_counter

    backend = OllamaBackend(OLLAMA_MODEL, ollama_server.url, num_ctx=2048)
    try:
        prompts = await member_prompts(backend)
        vocab = gguf_vocab_counter(str(gguf_path)).chat.model
        renders = [ollama_wire.render(list(p.messages)) for p in prompts]

        def tokenize(text: str) -> list[int]:
            return vocab.tokenize(text.encode(), add_bos=True, special=True)

        n = check_shared(renders, [tokenize(r) for r in renders], tokenize)
        # one after another: Ollama reports the prefix it reused, and so does the budget report
        results = [await backend.chat(p.messages, max_tokens=4, temperature=0.0) for p in prompts]
        assert all((r.usage.cached_tokens or 0) >= n - 1 for r in results[1:]), results
    finally:
        await backend.aclose()
