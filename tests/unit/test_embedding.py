"""Embedding the council: schemas, contexts, a parent graph with its own state, memory scope."""

import json
import operator
import re
from dataclasses import dataclass
from typing import Annotated

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore
from typing_extensions import TypedDict

from collective.errors import ConfigError
from collective.graph import CouncilContext, build_graph, council_node, graph
from collective.kb.store import Chunk
from tests.fakes import ListStore, ScriptedBackend

CHUNKS = [Chunk("mem_asa", "ASA keeps its shape to about 95 C.", "asa.md", (), 0.9)]


def backends():
    return {
        "planner": ScriptedBackend("planner", "Specialist 1: heat."),
        "specialists": [ScriptedBackend("spec", "Use ASA [KB#mem_asa].")],
        "judge": ScriptedBackend("judge", "ASA [KB#mem_asa]"),
    }


def context(**kw):
    for key, value in backends().items():
        kw.setdefault(key, value)
    kw.setdefault("knowledge", ListStore(CHUNKS))
    kw.setdefault("retrieval", "balanced")
    kw.setdefault("k", 2)
    return CouncilContext(**kw)


def prompts(ctx):
    """Every message any backend of `ctx` was sent."""
    members = [ctx.planner, ctx.judge, *ctx.specialists]
    return "\n".join(m["content"] for b in members for call in b.calls for m in call)


def test_json_schemas_of_input_output_and_context():
    assert graph.get_input_jsonschema()["required"] == ["question"]
    output = graph.get_output_jsonschema()["properties"]
    assert {"answer", "citations", "proposals", "budgets"} <= set(output)
    schema = graph.get_context_jsonschema()
    props = schema["properties"]
    assert [t["type"] for t in props["planner"]["anyOf"]] == ["string", "null"]
    assert props["planner"]["default"] is None
    assert props["k"] == {"default": 2, "title": "K", "type": "integer"}
    assert props["memory_scope"]["enum"] == ["thread", "user"]
    assert "retry_attempts" not in props
    json.dumps(schema)  # JSON all the way down


async def test_no_context_means_the_defaults(monkeypatch):
    """No context: the documented defaults (here: checked up to the first backend's use)."""
    seen = []

    def spy(spec):
        seen.append(spec)
        raise ConfigError("stop here")

    monkeypatch.setattr("collective.nodes.specialist.resolve_backend", spy)
    monkeypatch.setattr("collective.nodes.retrieve.open_knowledge", lambda ctx: ListStore(CHUNKS))
    with pytest.raises(ConfigError, match="stop here"):
        await build_graph().ainvoke({"question": "Which filament for a hot car?"})
    assert CouncilContext().planner is None  # no plan: the members are the first model calls
    assert seen[0] == CouncilContext().member_backend(0)


async def test_context_as_a_json_object_with_budget_tables():
    ctx = context()
    data = {
        "planner": ctx.planner,
        "specialists": list(ctx.specialists),
        "judge": ctx.judge,
        "knowledge": ctx.knowledge,
        "k": 2,
        "budgets": {
            "specialist": {
                "n_ctx": 8192,
                "output": 512,
                "sections": {"system": 500, "kb_chunks": 2000, "task": 500},
            }
        },
    }
    out = await build_graph().ainvoke({"question": "Hot car filament?"}, context=data)
    assert out["answer"].startswith("ASA")
    spec = [b for b in out["budgets"] if b["node"] == "specialist-1"][0]
    assert spec["max_output_tokens"] <= 512
    assert {s["name"] for s in spec["sections"]} == {"system", "kb_chunks", "task"}


def test_bad_budget_table_is_a_clear_error():
    with pytest.raises(ConfigError, match="budgets.judge"):
        CouncilContext(budgets={"judge": {"n_ctx": 100}})


@dataclass
class AppContext:
    tenant: str = "acme"


class AppState(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]
    user_question: str
    verdict: str
    sources: list[dict[str, str]]


def parent(node):
    builder = StateGraph(AppState, context_schema=AppContext)
    builder.add_node("council", node)
    builder.add_edge(START, "council")
    builder.add_edge("council", END)
    return builder.compile()


async def test_a_parents_own_context_is_refused_clearly():
    app = parent(build_graph())
    with pytest.raises(ConfigError, match="council_node"):
        await app.ainvoke({"question": "x"}, context=AppContext())


async def test_a_parent_state_without_question_is_refused_clearly():
    app = parent(build_graph())
    with pytest.raises(ConfigError, match="needs a `question`"):
        await app.ainvoke({"user_question": "x"}, context=CouncilContext())


async def test_council_node_mounts_the_council_in_a_parent_with_its_own_state():
    ctx = context()
    node = council_node(
        build_graph(),
        context=ctx,
        question="user_question",
        outputs={"verdict": "answer", "sources": "citations"},
    )
    app = parent(node)
    out = await app.ainvoke({"user_question": "Hot car filament?"}, context=AppContext())
    assert out["verdict"].startswith("ASA")
    assert out["sources"] == [{"id": "mem_asa", "source": "asa.md"}]
    assert "Hot car filament?" in prompts(ctx)


async def test_council_node_names_a_missing_question_key():
    app = parent(council_node(context=context(), question="nope"))
    with pytest.raises(ConfigError, match="'nope'"):
        await app.ainvoke({"user_question": "x"}, context=AppContext())


SECRET = "zirconia-7731"


async def fill_long_term(council, user, thread):
    """Runs on one thread until its L1 overflowed into L2."""
    store = council.store
    for i in range(12):
        ctx = context(user_id=user, l0_capacity=200, l1_capacity=300)
        await council.ainvoke(
            {"question": f"Run {i}: does {SECRET} filament warp when printed hot?"},
            {"configurable": {"thread_id": thread}},
            context=ctx,
        )
        if store.search(("collective", "memory", user, thread)):
            return
    raise AssertionError("L1 never archived to L2")


async def ask(council, thread, **kw):
    ctx = context(**kw)
    await council.ainvoke(
        {"question": f"Which {SECRET} filament warps when printed hot?"},
        {"configurable": {"thread_id": thread}},
        context=ctx,
    )
    return prompts(ctx)


async def test_long_term_memory_never_crosses_threads_or_users_unless_shared():
    council = build_graph(checkpointer=InMemorySaver(), store=InMemoryStore())
    await fill_long_term(council, "alice", "A")
    archived = council.store.search(("collective", "memory", "alice", "A"))
    assert all(SECRET in item.value["text"] for item in archived)
    assert council.store.search(("collective", "memory", "default")) == []

    assert SECRET not in (await ask(council, "B", user_id="bob")).replace(f"Which {SECRET}", "")
    # Another user, even asking on the same thread id: nothing of alice's.
    bob_on_a = await ask(council, "A2", user_id="bob", memory_scope="user")
    assert re.findall(r"Run \d+", bob_on_a) == []
    # Alice's other thread: only her thread's memory unless she shares it on purpose.
    assert re.findall(r"Run \d+", await ask(council, "C", user_id="alice")) == []
    shared = await ask(council, "D", user_id="alice", memory_scope="user")
    assert "From long-term memory:" in shared and re.findall(r"Run \d+", shared)
    # The thread itself recalls its own archive.
    assert re.findall(r"Run \d+", await ask(council, "A", user_id="alice"))


async def test_user_id_and_capacities_from_the_run():
    council = build_graph(checkpointer=InMemorySaver(), store=InMemoryStore())
    thread = {"configurable": {"thread_id": "t", "user_id": "carol"}}
    for i in range(12):
        ctx = context(l0_capacity=200, l1_capacity=300)  # no user_id: the config's
        await council.ainvoke({"question": f"Run {i}: hot car?"}, thread, context=ctx)
        if council.store.search(("collective", "memory", "carol", "t")):
            break
    assert council.store.search(("collective", "memory", "carol", "t"))
    state = await council.aget_state(thread)
    assert state.values["memory"]["config"]["l1_capacity"] == 300
