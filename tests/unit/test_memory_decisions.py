"""Only real decisions are pinned, and a long thread's L0 and L1 stay within their capacities."""

from __future__ import annotations

from langgraph.store.memory import InMemoryStore

from collective.memory.conversation import load_memory, remember_turn


def verdict(i: int) -> str:
    answer = (
        f"Run {i}: use PETG with a {200 + i % 50} C nozzle and a {60 + i % 30} C bed for part "
        f"{i}, because it bonds well between layers, tolerates a warm room, warps less than ABS "
        "and ASA, needs no enclosure, prints cleanly at moderate speeds with part cooling near "
        "half, and its heat deflection temperature sits near 70 C [KB#mem_petg] [KB#mem_abs].\n"
        "Reasons: layer adhesion, modest warping, and a heat deflection near 70 C."
    )
    if i % 2 == 0:
        answer += (
            f"\nDecision: part {i} is printed in PETG at {200 + i % 50} C on a textured sheet, "
            "with three perimeters and 30% gyroid infill, dried first for six hours at 65 C."
        )
    return answer


def test_a_plain_verdict_is_not_pinned_and_a_stated_decision_is():
    memory = remember_turn(None, None, run_id="r1", question="Which filament?", answer=verdict(1))
    assert memory.decisions == []
    memory = remember_turn(
        memory.to_dict(), None, run_id="r2", question="And part 10?", answer=verdict(10)
    )
    assert len(memory.decisions) == 1
    assert memory.decisions[0].startswith("part 10 is printed in PETG at 210 C")


def test_five_hundred_runs_on_one_thread_stay_within_l0_and_l1():
    store = InMemoryStore()
    data = None
    for i in range(500):
        memory = remember_turn(
            data,
            store,
            run_id=f"run-{i}",
            question=f"Which filament for part {i}?",
            answer=verdict(i),
        )
        assert memory.l0_tokens() <= memory.l0_capacity, i
        assert memory.l1_tokens() <= memory.l1_capacity, i
        data = memory.to_dict()
    memory = load_memory(data, store)
    # Half the verdicts stated a decision: the newest stay pinned, the oldest went to L2.
    assert 0 < len(memory.decisions) < 250
    assert memory.decisions[-1].startswith("part 498 is printed in PETG")
    archived = [i.value["text"] for i in store.search(memory.namespace, limit=1000)]
    assert any(text.startswith("part 0 is printed in PETG") for text in archived)
