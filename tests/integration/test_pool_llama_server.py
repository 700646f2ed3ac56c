"""A council fits the real llama-server's KV pool, its restarts and its tool rendering (issue 16).

llama-server started without `-np` (its default) or with `--kv-unified` runs several slots over
ONE KV pool of `-c` tokens and reports the whole `-c` as every slot's `n_ctx`. K specialists
whose prompts each fit that window together outgrow the pool, and llama.cpp then fails every
active slot with HTTP 500 `Context size has been exceeded.` (measured: 3 of 3 failed here
without admission control, at `-c 1024` with 440-token prompts). The servers run `-c 768` and
prompts of about 260 tokens so that the tests stay quick on two cores; the arithmetic is the
issue's (K x prompt > pool).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, ServerProcess
from conftest import serve_llama_server as serve

from collective.budget.assembly import chunks_section, text_section
from collective.budget.plans import ModelBudget
from collective.budget.trimming import Scored
from collective.budgeted_call import ModelCall, budgeted_call
from collective.graph.context import CouncilContext
from collective.kb.citations import tag
from collective.models.admission import POOL_TTL_S, AdmissionControl
from collective.models.llama_server import LlamaServerBackend
from collective.prompts import specialist as prompt
from collective.prompts.council import task_section

pytestmark = pytest.mark.integration

POOL = 768
QUESTION = "What does aspirin do, in one sentence?"
PLAN = ModelBudget(
    name="specialist",
    n_ctx=POOL,
    prompt_budget=210,
    output_budget=8,
    sections={"system": 120, "kb_chunks": 60, "task": 30},
)
"""About 260 tokens a call: two fit the 768-token pool at once, three do not."""

HUGE = " ".join(
    f"Aspirin note {i}: acetylsalicylic acid irreversibly inhibits the COX enzymes."
    for i in range(200)
)


@pytest.fixture(scope="module")
def default_server(llama_server_binary: str, gguf_path: Path) -> Iterator[ServerProcess]:
    """Started the default way: `-c` and no `-np` (4 slots over one pool)."""
    server = serve(llama_server_binary, gguf_path, "-c", str(POOL), name="pool-default")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def kv_unified_server(llama_server_binary: str, gguf_path: Path) -> Iterator[ServerProcess]:
    extra = ("-c", str(POOL), "-np", "3", "--kv-unified")
    server = serve(llama_server_binary, gguf_path, *extra, name="pool-kvu")
    try:
        yield server
    finally:
        server.stop()


def specialist_contents(member: str, k: int) -> list:
    """A specialist's sections, its KB section filled by one huge chunk."""
    chunk_id = f"mem_{abs(hash(member)) % 16**8:08x}"
    chunk = Scored(chunk_id, f"{tag(chunk_id)} [Score: 0.90] {HUGE}", 0.9, mark=tag(chunk_id))
    return [
        text_section("system", prompt.SYSTEM.format(member=member, k=k)),
        chunks_section("kb_chunks", [chunk]),
        task_section(prompt.task_text(QUESTION, "", member)),
    ]


async def council(
    backend: LlamaServerBackend, k: int, admission: AdmissionControl, events: list[dict]
) -> list[ModelCall]:
    """K specialists at once, as the council's fan-out sends them."""
    ctx = CouncilContext(budgets={"specialist": PLAN}, temperature=0.0)

    async def member(i: int) -> ModelCall:
        return await budgeted_call(
            ctx,
            role="specialist",
            agent=f"specialist-{i}",
            backend=backend,
            contents=specialist_contents(f"specialist-{i}", k),
            compose=prompt.compose,
            question=QUESTION,
            admission=admission,
            on_event=events.append,
        )

    return await asyncio.gather(*(member(i) for i in range(1, k + 1)))


@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("started", ["default", "kv-unified"])
async def test_every_specialist_answers_within_the_shared_pool(
    request: pytest.FixtureRequest, started: str, k: int
) -> None:
    server = request.getfixturevalue(f"{started.replace('-', '_')}_server")
    backend = LlamaServerBackend(server.url)
    admission, events = AdmissionControl(), []
    try:
        pool = await backend.pool()
        assert pool.unified and pool.tokens == POOL and pool.slot_ctx == POOL
        calls = await council(backend, k, admission, events)  # raises on any HTTP 500/400
    finally:
        await backend.aclose()
    assert len(calls) == k
    for call in calls:
        assert call.overflow is None and call.report.fits and call.report.n_ctx == POOL
        # The KB section is full: the huge chunk was trimmed to it.
        kb = next(s for s in call.report.sections if s.name == "kb_chunks")
        assert kb.trimmed and kb.used > 0
        assert call.report.prompt_tokens == call.result.usage.prompt_tokens  # counted exactly
    # The reservations in flight never added up to more than the pool (logged per admission).
    in_flight = [used for url, used, _ in admission.records if url == pool.server]
    assert len(in_flight) == k and max(in_flight) == admission.peak[pool.server] <= POOL
    reserved = calls[0].report.prompt_tokens + calls[0].report.max_output_tokens
    assert 2 * reserved <= POOL < 3 * reserved  # so exactly two ran at once...
    assert admission.peak[pool.server] > reserved  # ...not needlessly one at a time
    waits = [e for e in events if e.get("status") == "waiting"]
    assert waits and all("waiting for KV room on" in e["message"] for e in waits)


async def test_a_restarted_server_with_smaller_slots_is_planned_for(
    llama_server_binary: str, gguf_path: Path
) -> None:
    """Two runs on one backend object; between them the server comes back with half the slot."""
    server = serve(llama_server_binary, gguf_path, "-c", "1024", "-np", "1", name="pool-restart")
    # Planned for 768 tokens: 1,024 leaves the plan as it is, 512 scales it by 2/3.
    backend = LlamaServerBackend(server.url)
    admission = AdmissionControl()
    try:
        first = (await council(backend, 1, admission, []))[0]
        assert first.report.n_ctx == 1024
        server.stop()
        server.start(
            [
                *server.argv[: server.argv.index("-c")],
                "-c",
                "512",
                "-np",
                "1",
                "-t",
                str(os.cpu_count() or 2),
            ]
        )
        await asyncio.sleep(POOL_TTL_S)  # what a backend read is trusted for at most
        second = (await council(backend, 1, admission, []))[0]
    finally:
        await backend.aclose()
        server.stop()
    assert second.report.n_ctx == 512 and second.overflow is None  # planned, not refitted
    assert second.report.fits
    assert not any("CUT ANSWER" in w for w in second.result.warnings)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "kb_search",
            "description": "Search the knowledge base; returns chunks with their [KB#id] tags.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "what to look for"}},
                "required": ["query"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def tool_template_server(llama_server_binary: str, gguf_path: Path) -> Iterator[ServerProcess]:
    template = REPO / "tests" / "data" / "gemma-tools.jinja"
    extra = ("-c", str(POOL), "-np", "1", "--jinja", "--chat-template-file", str(template))
    server = serve(llama_server_binary, gguf_path, *extra, name="pool-tools")
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("template", ["chatml-fallback", "tool-template"])
async def test_counted_prompt_with_tools_equals_the_servers_prompt_tokens(
    request: pytest.FixtureRequest, template: str
) -> None:
    name = "default_server" if template == "chatml-fallback" else "tool_template_server"
    backend = LlamaServerBackend(request.getfixturevalue(name).url)
    plan = ModelBudget(
        name="chat",
        n_ctx=POOL,
        prompt_budget=480,
        output_budget=4,
        sections={"system": 60, "task": 60, "tools": 300},
    )
    ctx = CouncilContext(budgets={"chat": plan}, temperature=0.0)
    try:
        call = await budgeted_call(
            ctx,
            role="chat",
            agent="chat",
            backend=backend,
            contents=[
                text_section("system", "You are the judge. Check claims with the tools."),
                text_section("task", QUESTION),
                text_section("tools", json.dumps(TOOLS)),
            ],
            compose=lambda s: [
                {"role": "system", "content": s["system"]},
                {"role": "user", "content": s["task"]},
            ],
            question=QUESTION,
            tools=TOOLS,
        )
        # What counting the schemas as JSON text beside the messages used to report.
        as_json = await backend.count_prompt(call.prompt.messages) + (
            await backend.token_counter()
        ).count(json.dumps(TOOLS))
    finally:
        await backend.aclose()
    assert call.report.prompt_tokens == call.result.usage.prompt_tokens
    # Neither server renders the schemas as their JSON text: the fallback drops them, the
    # tool template wraps them in its own instructions.
    assert as_json != call.result.usage.prompt_tokens
