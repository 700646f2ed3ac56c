"""A LangChain chat model as a council member: counted by its own `get_num_tokens_from_messages`
under a declared window, labelled `estimated` in every report (issue 27)."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import convert_to_messages

from collective.budget.assembly import text_section
from collective.budget.counting import _tiktoken_encoding
from collective.budgeted_call import budgeted_call
from collective.errors import ConfigError
from collective.graph import build_graph
from collective.graph.context import CouncilContext
from collective.models.langchain_model import LangChainBackend
from tests.unit.test_graph_council import context

KIND = "estimated:langchain:FakeListChatModel+10%"


def chat_model(*responses: str, **fields: object) -> FakeListChatModel:
    # The model's own token ids (a real tokenizer), as a provider's model would count.
    ids = _tiktoken_encoding("cl100k_base").encode_ordinary
    return FakeListChatModel(responses=list(responses), custom_get_token_ids=ids, **fields)


async def ask(backend: LangChainBackend, cap: int = 64):
    return await budgeted_call(
        CouncilContext(output_caps={"judge": cap}, usage_log=None),
        role="judge",
        agent="judge",
        backend=backend,
        contents=[text_section("system", "Be brief."), text_section("task", "PLA or PETG?")],
        compose=lambda s: [
            {"role": "system", "content": s["system"]},
            {"role": "user", "content": s["task"]},
        ],
        question="PLA or PETG?",
    )


async def test_a_langchain_model_is_counted_by_itself_under_its_declared_window():
    model = chat_model("PETG, for heat.")
    call = await ask(LangChainBackend(model, n_ctx=2048))
    assert call.result.text == "PETG, for heat."
    assert call.report.n_ctx == 2048 and call.report.fits
    assert call.report.token_counter == KIND  # never passed off as exact
    own = model.get_num_tokens_from_messages(convert_to_messages(call.prompt.messages))
    assert own < call.report.prompt_tokens <= own * 1.1 + 1  # its own count, with the margin


async def test_its_answer_stops_at_the_reserved_output():
    call = await ask(LangChainBackend(chat_model("word " * 400), n_ctx=2048), cap=16)
    assert call.result.finish_reason == "length"
    assert call.result.usage.completion_tokens <= 16
    assert call.report.prompt_tokens + call.report.max_output_tokens <= 2048


async def test_a_bare_chat_model_sits_on_the_council_with_its_window_in_metadata():
    judge = chat_model("ASA [KB#mem_asa].", metadata={"n_ctx": 4096})
    out = await build_graph().ainvoke({"question": "Hot car?"}, context=context(k=1, judge=judge))
    assert out["answer"].splitlines()[0] == "ASA [KB#mem_asa]."
    report = next(b for b in out["budgets"] if b["node"] == "judge")
    assert report["token_counter"] == KIND and report["n_ctx"] == 4096
    assert report["server"] == "langchain:FakeListChatModel"


def test_a_chat_model_without_a_window_is_refused_with_what_to_set():
    with pytest.raises(ConfigError, match="n_ctx"):
        LangChainBackend.wrap(chat_model("x"))
