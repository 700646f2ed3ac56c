"""A node's model call as a LangChain chat-model run, so its tokens reach LangGraph's streams.

LangGraph's `stream_mode="messages"` and `astream_events` (`on_chat_model_stream`) listen to
the callbacks of the run's config; a chat model reports `on_chat_model_start`, one
`on_llm_new_token` per piece (an `AIMessageChunk`) and `on_llm_end`. `ChatModelRun` makes the
same reports for collective's own backends. Each message carries the run config's metadata
(`langgraph_node`, ...) plus `agent` (`judge`, `specialist-2`, ...) and `role`, and the tags
`role` and `agent`, so an app can show the judge's verdict only.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any
from uuid import uuid4

from collective.models.base import ChatResult

__all__ = ["ChatModelRun"]


class ChatModelRun:
    """`async with ChatModelRun(agent, role, model) as run:` around one model call.

    Outside a graph run (no runnable config) every method is a no-op.

    Args:
        agent: Who calls (`judge`, `specialist-2`): the run's name, tag and `agent` metadata.
        role: The role (`judge`, `specialist`, ...): a tag and `role` metadata.
        model: The model's name (`ls_model_name`).
    """

    def __init__(self, agent: str, role: str, model: str) -> None:
        self.agent = agent
        self.role = role
        self.model = model
        self.result: ChatResult | None = None
        """Set by the caller when the call succeeded: reported in `on_llm_end`."""
        self._run: Any = None
        self._id = ""

    async def __aenter__(self) -> ChatModelRun:
        from langchain_core.runnables.config import get_async_callback_manager_for_config
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:
            return self
        manager = get_async_callback_manager_for_config(config)
        if not manager.handlers:
            return self
        manager.add_tags(list(dict.fromkeys([self.role, self.agent])))
        manager.add_metadata(
            {
                "agent": self.agent,
                "role": self.role,
                "ls_provider": "collective",
                "ls_model_name": self.model,
                "ls_model_type": "chat",
            }
        )
        run_id = uuid4()
        self._id = f"lc_run--{run_id}"
        runs = await manager.on_chat_model_start(
            {"name": self.model, "id": ["collective", "models", self.model]},
            [[]],
            run_id=run_id,
            name=self.agent,
        )
        self._run = runs[0] if runs else None
        return self

    async def token(self, text: str) -> None:
        """Report one piece of the answer (an `AIMessageChunk`)."""
        if self._run is None or not text:
            return
        from langchain_core.messages import AIMessageChunk
        from langchain_core.outputs import ChatGenerationChunk

        chunk = ChatGenerationChunk(message=AIMessageChunk(content=text, id=self._id))
        await self._run.on_llm_new_token(text, chunk=chunk)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        run, self._run = self._run, None
        if run is None:
            return
        if exc is not None or self.result is None:
            await run.on_llm_error(exc or RuntimeError("the model call ended without a result"))
            return
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, LLMResult

        usage = self.result.usage
        message = AIMessage(
            content=self.result.text,
            id=self._id,  # the streamed chunks' id: LangGraph does not send it again
            usage_metadata={
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            },
            response_metadata={
                "model_name": self.result.model or self.model,
                "finish_reason": self.result.finish_reason,
            },
        )
        await run.on_llm_end(LLMResult(generations=[[ChatGeneration(message=message)]]))
