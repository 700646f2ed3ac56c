import asyncio
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore

from collective.budget.counting import tiktoken_counter
from collective.errors import BackendUnavailable
from collective.memory import (
    ExtractiveSummarizer,
    MemoryIntegrityError,
    MemoryStateError,
    TieredMemory,
)
from collective.memory.store import open_sqlite_store
from collective.memory.summarize import backend_summarizer
from collective.models.base import Backend, ChatResult, Health, Usage

COUNTER = tiktoken_counter("cl100k_base")
WORDS = "parser cache queue retry timeout login token schema index replica shard lease".split()


def sentence(rng, n=12):
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def small(**kwargs):
    options = {"l0_capacity": 600, "l1_capacity": 2_000, "store": InMemoryStore()}
    return TieredMemory(COUNTER, **{**options, **kwargs})


def run_task(memory, rng, task_id, turns=4, decision=True):
    memory.begin_task(task_id, f"Task {task_id}: {sentence(rng, 6)}")
    for _ in range(turns):
        memory.add_turn("user", sentence(rng))
        memory.add_turn("assistant", "We decided to " + sentence(rng, 10))
    if decision:
        memory.record_decision(f"{task_id}: use the {rng.choice(WORDS)} strategy")
    memory.complete_task(task_id, f"done with {rng.choice(WORDS)}")


def test_l0_compresses_at_80_percent_and_keeps_the_current_task_in_full():
    rng = random.Random(1)
    memory = small(l1_capacity=10_000)
    run_task(memory, rng, "T1")
    memory.begin_task("T2", "Task T2: migrate the login tokens")
    before = memory.l0_tokens()
    while memory.metrics.l0.compressions == 0:
        before = memory.l0_tokens()
        text = sentence(rng, 20)
        memory.add_turn("user", text)
    assert before < 0.8 * 600 <= before + COUNTER.count(f"user: {text}") + 5
    # the completed task went to L1 as an episode; the current task stayed in L0 in full
    (episode,) = [e for e in memory.episodes if e.id == "T1"]
    assert episode.header.startswith("[T1] Task T1:")
    assert "-> done with" in episode.header and episode.body
    assert list(memory.tasks) == ["T2"]
    assert memory.turns[-1].text == text  # the newest turn, verbatim
    assert all(t.task_id == "T2" for t in memory.turns)
    assert memory.l0_tokens() <= 0.4 * 600 + COUNTER.count(memory.tasks["T2"].render())
    kinds = [(e.tier, e.kind) for e in memory.events]
    assert kinds.index(("L0", "warning")) < kinds.index(("L0", "compression"))
    m = memory.metrics.l0
    assert m.compressions == 1 and m.tokens_saved > 0 and 0 < m.ratio < 1
    assert m.tokens_after < m.tokens_before
    assert memory.last_compression is not None and "[T1]" in memory.last_compression.output


def test_warning_at_70_percent_fires_once_per_crossing():
    rng = random.Random(2)
    memory = small(l0_capacity=1_000, l1_capacity=10_000)
    memory.begin_task("T1", "Task T1")

    def l0_warnings():
        return [e for e in memory.events if e.tier == "L0" and e.kind == "warning"]

    while memory.l0_tokens() < 700:
        memory.add_turn("user", sentence(rng, 8))
    assert memory.l0_tokens() < 800  # warned, not yet compressed
    assert len(l0_warnings()) == 1 and l0_warnings()[0].usage_pct >= 70
    memory.add_turn("user", "ok")
    assert len(l0_warnings()) == 1  # still above 70%: no repeat
    while memory.metrics.l0.compressions == 0:
        memory.add_turn("user", sentence(rng, 8))
    while memory.l0_tokens() < 700:
        memory.add_turn("user", sentence(rng, 8))
    assert len(l0_warnings()) == 2  # re-armed after compression brought L0 under 70%


def test_l1_selective_compression_keeps_recent_tasks_and_pinned_items_in_full():
    rng = random.Random(3)
    memory = small(l1_capacity=800)
    for i in range(14):
        run_task(memory, rng, f"T{i}")
    assert memory.metrics.l1.compressions >= 1
    assert memory.l2_keys == []  # selective compression was enough
    tasks = [e for e in memory.episodes if e.kind == "task"]
    full = [e for e in tasks if not e.compressed]
    assert 3 <= len(full) <= 5 and full == tasks[-len(full) :]  # the most recent ones
    assert all(e.body for e in full)
    for old in tasks[: -len(full)]:
        assert old.compressed and old.body == "" and COUNTER.count(old.header) <= 40
        assert old.header.startswith(f"[{old.id}]")
    assert len(memory.decisions) == 14
    assert memory.l1_tokens() < 800


def test_l1_overflow_archives_the_oldest_tasks_to_l2():
    rng = random.Random(4)
    store = InMemoryStore()
    memory = small(l1_capacity=500, store=store, session_id="s1")
    i = 0
    while len(memory.l2_keys) < 3:
        run_task(memory, rng, f"T{i}", decision=False)
        i += 1
    last = i - 1
    assert memory.l2_keys[:3] == ["T0", "T1", "T2"]
    assert memory.metrics.archived == len(memory.l2_keys) > 0
    assert memory.l1_tokens() <= 500
    kept = [int(e.id[1:]) for e in memory.episodes if e.kind == "task"]
    assert len(kept) >= 3 and kept == sorted(kept)  # at least the 3 most recent stay
    assert max(int(k[1:]) for k in memory.l2_keys) < min(kept)  # the oldest went first
    item = store.get(("collective", "memory", "s1"), "T0")
    assert item is not None and item.value["text"].startswith("[T0] Task T0:")
    assert memory.recall("T0") == item.value
    assert memory.recall(f"T{last}") is None  # still in L1
    assert any(e.tier == "L2" and e.kind == "archive" for e in memory.events)
    with pytest.raises(MemoryStateError, match="already used"):
        memory.begin_task("T0", "archived ids stay taken")


def test_l2_persists_in_a_sqlite_file(tmp_path):
    path = tmp_path / "l2" / "memory.sqlite"
    rng = random.Random(5)
    memory = small(l1_capacity=500, store=open_sqlite_store(path))
    for i in range(30):
        run_task(memory, rng, f"T{i}", decision=False)
    archived = memory.l2_keys
    assert archived
    reopened = open_sqlite_store(path)
    for key in archived:
        item = reopened.get(("collective", "memory", "default"), key)
        assert item is not None and item.value["id"] == key


def test_no_store_writes_no_file(tmp_path, monkeypatch):
    """Without a store L2 stays in the process: no SQLite file appears in the working dir."""
    monkeypatch.chdir(tmp_path)
    memory = TieredMemory(COUNTER, l0_capacity=600, l1_capacity=500)
    rng = random.Random(6)
    for i in range(30):
        run_task(memory, rng, f"T{i}", decision=False)
    assert memory.l2_keys and memory.recall(memory.l2_keys[0]) is not None
    assert list(tmp_path.rglob("*")) == []


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), ops=st.integers(20, 90))
def test_nothing_that_must_survive_is_ever_lost(seed, ops):
    """Random sessions; after every step, check survival independently of `_verify`."""
    rng = random.Random(seed)
    memory = small(l0_capacity=400, l1_capacity=900)
    decisions, active, completed = [], [], []
    for step in range(ops):
        op = rng.choice(["turn", "turn", "turn", "begin", "complete", "decide"])
        if op == "begin" or (op == "complete" and not active):
            task = f"T{step}"
            memory.begin_task(task, f"Task {step}: {sentence(rng, 5)}")
            active.append(task)
        elif op == "complete":
            task = active.pop(rng.randrange(len(active)))
            memory.complete_task(task, sentence(rng, 4))
            completed.append(task)
        elif op == "decide":
            decisions.append(f"decision {step}: {sentence(rng, 6)}")
            memory.record_decision(decisions[-1])
        else:
            memory.add_turn(rng.choice(["user", "assistant"]), sentence(rng, rng.randint(3, 40)))

        everything = memory.summary(10**6)
        # Past a quarter of L1, the oldest pinned decisions move to L2 (`DECISION_SHARE`).
        archived = {i.value["text"] for i in memory.store.search(memory.namespace, limit=10**4)}
        for item in decisions:
            assert item in everything or item in archived
        for task in active:
            assert f"[{task}]" in everything
        for task in completed:
            assert f"[{task}]" in everything or task in memory.l2_keys
        # L0 is under 80%, or holds nothing but the current task context (kept in full)
        current = all(t.status == "active" for t in memory.tasks.values())
        turns = sum(COUNTER.count(t.render()) for t in memory.turns)
        assert memory.l0_tokens() < 0.8 * 400 or (current and turns <= 0.4 * 400)
        over = any(e.kind == "over_capacity" for e in memory.events)
        assert memory.l1_tokens() <= 900 or over


def test_integrity_check_catches_a_compression_that_loses_something():
    class LossyMemory(TieredMemory):
        def _compress_l1(self):
            snapshot = self._must_survive()
            self.decisions.pop(0)  # the bug the check exists for
            self._verify(snapshot)

    memory = LossyMemory(COUNTER, InMemoryStore(), l0_capacity=600, l1_capacity=1_200)
    rng = random.Random(7)
    with pytest.raises(MemoryIntegrityError, match="decision 'T0: use the"):
        for i in range(20):
            run_task(memory, rng, f"T{i}")


def test_a_summarizer_that_overruns_is_cut_to_budget():
    calls = []

    def verbose(text, max_tokens):  # an LLM that ignores its budget
        calls.append(max_tokens)
        return text + " " + text

    memory = small(summarizer=verbose, task_summary_tokens=50)
    rng = random.Random(8)
    for i in range(3):
        run_task(memory, rng, f"T{i}", turns=6)
    assert calls and all(0 < limit <= 300 for limit in calls)
    for episode in memory.episodes:
        if episode.kind == "task":
            assert COUNTER.count(episode.body) <= 50


def test_summary_fits_its_allocation_and_prefers_what_matters():
    rng = random.Random(9)
    memory = small(l0_capacity=2_000, l1_capacity=6_000)
    for i in range(16):
        run_task(memory, rng, f"T{i}")
    memory.begin_task("T99", "Task T99: fix the lease renewal")
    memory.add_turn("user", "first turn of T99 " + sentence(rng))
    newest = "assistant: the lease renews every 10 seconds now."
    memory.add_turn("assistant", newest.split(": ", 1)[1])
    for budget in (0, 10, 40, 80, 150, 400, 1_000, 5_000):
        text = memory.summary(budget)
        assert COUNTER.count(text) <= budget
    tight = memory.summary(80)
    assert "[T99] (active) Task T99: fix the lease renewal" in tight
    medium = memory.summary(400)
    assert medium.endswith(newest)  # the most recent turn, verbatim, last
    assert "first turn of T99" in medium
    roomy = memory.summary(5_000)
    assert "Earlier in the session:" in roomy and "[T0]" in roomy
    assert roomy.index("Earlier in the session:") < roomy.index("Recent conversation:")


def test_state_round_trips_through_json_and_continues_identically():
    rng_a, rng_b = random.Random(10), random.Random(10)
    original = small()
    for i in range(8):
        run_task(original, rng_a, f"T{i}")
    data = json.loads(json.dumps(original.to_dict()))
    restored = TieredMemory.from_dict(data, COUNTER, store=original.store)
    assert restored.to_dict() == data
    assert restored.summary(300) == original.summary(300)
    assert restored.usage() == original.usage()
    # the same further steps give the same state (the rngs stay in step)
    for _ in range(8):
        sentence(rng_b)
    for i in range(8, 12):
        seed = rng_a.random()
        run_task(original, random.Random(seed), f"T{i}")
        run_task(restored, random.Random(seed), f"T{i}")
    assert without_timings(restored.to_dict()) == without_timings(original.to_dict())
    with pytest.raises(MemoryStateError, match="another version"):
        TieredMemory.from_dict({"version": 99}, COUNTER)


def without_timings(state):
    for tier in ("L0", "L1"):
        del state["metrics"][tier]["seconds"]
    return state


def test_task_errors():
    memory = small()
    memory.begin_task("T1", "one")
    with pytest.raises(MemoryStateError, match="already used"):
        memory.begin_task("T1", "again")
    with pytest.raises(MemoryStateError, match="not active"):
        memory.complete_task("T2", "never begun")
    memory.complete_task("T1", "ok")
    with pytest.raises(MemoryStateError, match="not active"):
        memory.complete_task("T1", "twice")


def test_default_capacities_and_compression_at_6400_tokens():
    memory = TieredMemory(COUNTER, InMemoryStore())
    usage = memory.usage()
    assert usage["L0"]["capacity"] == 8_000 and usage["L1"]["capacity"] == 32_000
    rng = random.Random(11)
    memory.begin_task("T1", "long task")
    peak = 0
    while memory.metrics.l0.compressions == 0:
        peak = max(peak, memory.l0_tokens())
        memory.add_turn("user", " ".join(sentence(rng, 30) for _ in range(5)))
    assert 0.7 * 8_000 <= peak < 0.8 * 8_000
    assert memory.l0_tokens() <= 0.4 * 8_000
    assert memory.episodes[0].kind == "conversation"


def test_extractive_summarizer_is_deterministic_and_keeps_key_sentences():
    summarize = ExtractiveSummarizer(COUNTER)
    text = (
        "We looked at the login flow. The weather was nice. Coffee was had. "
        "We decided to store tokens in Redis because sessions must survive restarts. "
        "Someone told a joke. Lunch happened. The result: p95 latency fell to 40 ms."
    )
    summary = summarize(text, 40)
    assert summary == summarize(text, 40)
    assert COUNTER.count(summary) <= 40
    assert "We decided to store tokens in Redis" in summary
    assert "The result: p95 latency fell to 40 ms." in summary
    assert "joke" not in summary
    assert summary.index("login flow") < summary.index("Redis")  # original order
    assert summarize("Short enough.", 40) == "Short enough."
    assert summarize(text, 0) == ""


class EchoBackend(Backend):
    """A backend whose 'model' answers with the first line of the excerpt (deterministic)."""

    spec = "echo:"
    model = "echo"

    def __init__(self, fail=False):
        self.fail = fail
        self.requests = []

    async def context_window(self):
        return 32_768

    async def token_counter(self):
        return COUNTER

    async def chat(self, messages, *, max_tokens, **kwargs):
        self.requests.append((messages, max_tokens))
        if self.fail:  # the fault a real server outage causes
            raise BackendUnavailable("echo backend is down")
        first = messages[-1]["content"].splitlines()[0]
        return ChatResult(text=f"LLM: {first}", usage=Usage(0, 0), model=self.model)

    async def health(self):
        return Health(ok=True, detail="")


@pytest.mark.parametrize("fail", [False, True])
async def test_backend_summarizer_runs_on_the_loop_from_a_worker_thread(fail):
    backend = EchoBackend(fail=fail)
    fallback = ExtractiveSummarizer(COUNTER)
    summarizer = backend_summarizer(backend, asyncio.get_running_loop(), fallback, timeout=5)
    memory = small(summarizer=summarizer)
    rng = random.Random(12)

    def session():
        for i in range(4):
            run_task(memory, rng, f"T{i}")

    await asyncio.to_thread(session)
    assert backend.requests and "at most" in backend.requests[0][0][0]["content"]
    bodies = [e.body for e in memory.episodes if e.kind == "task"]
    assert bodies
    if fail:
        assert not any(b.startswith("LLM:") for b in bodies)  # the extractive fallback wrote them
    else:
        assert all(b.startswith("LLM: user:") for b in bodies)
