"""The invariant, always: counted prompt tokens + reserved output <= the real context."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collective.budget.assembly import (
    assemble,
    chunks_section,
    labelled_section,
    text_section,
)
from collective.budget.counting import EstimateCounter, tiktoken_counter
from collective.budget.plans import JUDGE_PRESET, SPECIALIST_PRESET
from collective.budget.trimming import Scored
from collective.commands.render import section_summary
from collective.models.openai_api import declared_counter

COUNTERS = [
    tiktoken_counter("cl100k_base"),
    tiktoken_counter("o200k_harmony"),
    EstimateCounter(),
    declared_counter("cl100k_base"),  # the `openai:` backend's declared tokenizer, with margin
]
alphabet = st.characters(codec="utf-8", exclude_categories=("Cs",))
texts = st.text(alphabet, max_size=3_000)


def compose(sections):
    system = "\n\n".join(s for s in (sections.get("system"), sections.get("tools")) if s)
    user = "\n\n".join(
        f"## {name}\n{text}" for name, text in sections.items() if name not in ("system", "tools")
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counter_index=st.integers(0, len(COUNTERS) - 1),
    judge=st.booleans(),
    n_ctx=st.integers(600, 140_000),
    system=texts,
    task=texts,
    summary=texts,
    chunks=st.lists(st.tuples(texts, st.floats(0, 1)), max_size=12),
    proposals=st.lists(texts, max_size=5),
    repeat=st.integers(1, 40),
)
def test_assembled_prompts_always_fit(
    counter_index, judge, n_ctx, system, task, summary, chunks, proposals, repeat
):
    counter = COUNTERS[counter_index]
    plan = (JUDGE_PRESET if judge else SPECIALIST_PRESET).fit_to_context(n_ctx)
    contents = [
        text_section("system", system * repeat),
        text_section("task", task * repeat, keep="both"),
        text_section("conversation_summary", summary * repeat, keep="end"),
        chunks_section(
            "kb_chunks", [Scored(f"c{i}", t * repeat, s) for i, (t, s) in enumerate(chunks)]
        ),
    ]
    if judge:
        contents.append(
            labelled_section("proposals", [(f"P{i}", p * repeat) for i, p in enumerate(proposals)])
        )
        contents.append(text_section("evidence", "".join(proposals) * repeat))
    result = assemble(plan, counter, contents, compose, node="n", model="m")
    report = result.report
    assert report.prompt_tokens == counter.count_messages(result.messages)
    assert report.prompt_tokens + report.max_output_tokens <= plan.n_ctx
    for section in report.sections:
        limit = section.granted or section.allocated
        assert section.used <= limit, section


def test_slack_flows_to_kb_chunks_first_and_the_report_shows_it():
    counter = tiktoken_counter("cl100k_base")
    chunks = [Scored(f"c{i}", f"chunk {i} " + "word " * 400, 1 - i / 100) for i in range(60)]
    result = assemble(
        SPECIALIST_PRESET,
        counter,
        [text_section("system", "Be brief."), chunks_section("kb_chunks", chunks)],
        compose,
        node="specialist",
        model="m",
    )
    by_name = {s.name: s for s in result.report.sections}
    kb = by_name["kb_chunks"]
    assert by_name["tools"].used == 0
    assert kb.granted is not None and kb.granted > kb.allocated + 4_000 - 1
    assert kb.used > kb.allocated  # it really used the slack
    # the budget table shows it (BudgetReport's own text lines had no caller and are gone)
    assert f"+{kb.granted - kb.allocated}" in section_summary(kb.__dict__)
    assert result.report.fits


def test_report_lines_and_json_shape():
    counter = tiktoken_counter("cl100k_base")
    result = assemble(
        SPECIALIST_PRESET.fit_to_context(4096),
        counter,
        [text_section("system", "hi"), text_section("task", "What is PLA?")],
        compose,
        node="specialist",
        model="gemma",
    )
    data = result.report.to_dict()
    assert {
        "node",
        "model",
        "n_ctx",
        "prompt_tokens",
        "max_output_tokens",
        "token_counter",
        "sections",
    } <= set(data)
    assert data["token_counter"] == "tiktoken:cl100k_base"
    assert data["n_ctx"] == 4096 and "scaled" in data["scaled"]
    assert all({"name", "allocated", "used"} <= set(s) for s in data["sections"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counter_index=st.integers(0, len(COUNTERS) - 1),
    n_ctx=st.integers(1_500, 40_000),
    k=st.integers(1, 12),
    question=texts,
    plan=texts,
    summary=texts,
    chunks=st.lists(st.tuples(texts, st.floats(0, 1)), max_size=12),
    repeat=st.integers(1, 20),
)
def test_members_share_one_prefix_and_each_fits(
    counter_index, n_ctx, k, question, plan, summary, chunks, repeat
):
    """The K members' prompts (issue 25): each within its budget, the same KB chunks for all,
    and the same text up to the member's own part wherever nothing was cut to fit."""
    import collective.graph  # noqa: F401  (the nodes import the graph's context first)
    from collective import agents
    from collective.nodes.specialist import member_sections
    from collective.prompts import council
    from collective.prompts import specialist as prompt

    counter = COUNTERS[counter_index]
    budget = SPECIALIST_PRESET.fit_to_context(n_ctx).with_output(min(384, n_ctx // 4))
    scored = [Scored(f"c{i}", t * repeat, s) for i, (t, s) in enumerate(chunks)]
    prompts = [
        assemble(
            budget,
            counter,
            member_sections(question * repeat, plan, summary * repeat, scored, member, k),
            prompt.compose,
            node=member,
            model="m",
        )
        for member in agents.members(k)
    ]
    assert all(p.report.fits for p in prompts)
    assert len({tuple(p.kept("kb_chunks")) for p in prompts}) == 1
    if not any(s.trimmed for p in prompts for s in p.report.sections):
        user = [p.messages[-1]["content"] for p in prompts]
        assert len({u[: u.rindex(council.OWN_PART)] for u in user}) == 1
