"""The judge's verification tools, `kb_search` and `kb_get`, as LangChain tools.

Both read the same knowledge store the council retrieved from; every chunk they return is
remembered in `fetched`, so the judge can cite it and the citation resolves like any other.
A search names the chunks the judge's prompt already shows (`shown`) by tag and heading
instead of repeating their text: the judge's search for its question finds mostly those, and
reading them twice cost the judge's next call about 1,300 of its 1,800 new tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from collective.kb.citations import format_chunk, neutralise, tag
from collective.kb.retrieval import retrieve
from collective.kb.store import Chunk, KnowledgeStore

__all__ = ["ID_CHARS", "QUERY_CHARS", "ToolResult", "VerificationTools"]

QUERY_CHARS = 120
"""The longest search query (a few key words): its schema's `maxLength`, so a call held to
the schema by a grammar always closes (`collective.models.tool_calls.tool_call_schema`)."""
ID_CHARS = 40
"""The longest chunk id a call may name (`mem_` and 16 hex digits, perhaps tagged `KB#`)."""


Parts = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer in parts, which its text joins by lines.

    A part is `(chunk id, its rendering)` for a chunk the answer shows in full, `("", text)` for
    anything else (a chunk named only, a message).
    """

    parts: Parts

    @property
    def text(self) -> str:
        """The result as the model reads it."""
        return "\n".join(text for _, text in self.parts)


class VerificationTools:
    """`kb_search(query)` under the run's applied retrieval profile and `kb_get(id)`.

    Args:
        store: The knowledge store.
        profile: The applied retrieval profile (`lean`, `balanced` or `deep`).
    """

    def __init__(self, store: KnowledgeStore, profile: str) -> None:
        self.store = store
        self.profile = profile
        self.fetched: dict[str, Chunk] = {}
        """Chunks the tools returned, by id: citable by the judge."""
        self.shown: set[str] = set()
        """Ids of chunks the judge's prompt shows in full: a search only names them."""
        self.tools: list[BaseTool] = [
            StructuredTool.from_function(
                self.kb_search,
                name="kb_search",
                description="Search the knowledge base. Returns tagged chunks: [KB#id] text.",
                parse_docstring=True,
                response_format="content_and_artifact",
            ),
            StructuredTool.from_function(
                self.kb_get,
                name="kb_get",
                description="The full text of one knowledge-base chunk by its id (mem_...).",
                parse_docstring=True,
                response_format="content_and_artifact",
            ),
        ]
        self.schemas: list[dict[str, Any]] = [convert_to_openai_tool(t) for t in self.tools]
        """The tools in OpenAI's function-calling shape, as backends send them."""

    def kb_search(self, query: Annotated[str, Field(max_length=QUERY_CHARS)]) -> tuple[str, Parts]:
        """Search the knowledge base for `query`.

        Args:
            query: What to look for.
        """
        chunks = retrieve(self.store, query, self.profile).injected
        self.fetched.update((c.id, c) for c in chunks)
        return _answer(tuple(self._found(c) for c in chunks) or (("", "(no matching chunks)"),))

    def _found(self, chunk: Chunk) -> tuple[str, str]:
        """A search hit: the chunk, or its tag and heading where the prompt shows it already."""
        if chunk.id not in self.shown:
            return chunk.id, format_chunk(chunk)
        heading = f" {neutralise(chunk.heading)}" if chunk.heading else ""
        return "", f"{tag(chunk.id)}{heading} (its text is in the knowledge base above)"

    def kb_get(self, id: Annotated[str, Field(max_length=ID_CHARS)]) -> tuple[str, Parts]:  # noqa: A002
        """The full text of the chunk with this id.

        Args:
            id: A chunk id such as mem_0a1b2c3d4e5f6a7b.
        """
        chunk = self.store.get(id.removeprefix("KB#"))
        if chunk is None:
            return _answer((("", f"(no chunk with id {id})"),))
        self.fetched[chunk.id] = chunk
        return _answer(((chunk.id, format_chunk(chunk)),))

    def run(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run the tool called `name`; a bad call becomes a message the model can read."""
        tool = next((t for t in self.tools if t.name == name), None)
        if tool is None:
            return ToolResult((("", f"(unknown tool {name}; available: kb_search, kb_get)"),))
        try:
            call = {"type": "tool_call", "name": name, "args": arguments, "id": name}
            return ToolResult(tool.invoke(call).artifact)
        except Exception as error:  # a model's malformed arguments must not end the verdict
            return ToolResult((("", f"(tool {name} failed: {str(error).splitlines()[0]})"),))


def _answer(parts: Parts) -> tuple[str, Parts]:
    """A tool function's answer: its text for the model, its parts as the artifact."""
    return ToolResult(parts).text, parts
