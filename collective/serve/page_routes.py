"""What the page (`collective/serve/page/`, served at `/`) reads beyond a run's own events.

The page starts a run at `POST /collective/v1/runs` and reads its events (`collective.serve.app`:
the events `collective ask`'s live view reads). This module adds:

- `verdict_lines`: the verdict's lines with the statuses of their claims, as `collective ask`
  marks them (`collective.kb.marks.line_statuses`), sent with the run's `result` event as
  `lines`, so that the page marks each line exactly as the terminal does;
- `GET /collective/v1/threads/{thread}`: a thread's earlier turns (its finished runs' questions
  and verdicts, oldest first), read from the checkpoints of the council's thread for that name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

if TYPE_CHECKING:
    from collective.serve.runs import Councils

__all__ = ["THREADS_PATH", "earlier_turns", "page_routes", "verdict_lines"]

THREADS_PATH = "/collective/v1/threads"
"""`GET THREADS_PATH/{thread}`: the thread's earlier turns."""

_THREAD_CHARS = 200
"""The longest thread name (as `POST /collective/v1/runs` takes it)."""


def verdict_lines(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The verdict's lines, each `{"text", "marks"}` (claim statuses: `supported`, ...)."""
    from collective.kb.marks import line_statuses

    answer, claims = str(result.get("answer") or ""), list(result.get("claims") or [])
    return [{"text": line, "marks": marks} for line, marks in line_statuses(answer, claims)]


async def earlier_turns(graph: Any, thread_id: str) -> list[dict[str, str]]:
    """The finished runs of the council's thread `thread_id`, oldest first.

    Each is `{"question", "answer"}`; a run under way (its checkpoint has work left) is not one.
    """
    turns: list[dict[str, str]] = []
    seen: set[tuple[Any, Any]] = set()
    async for snapshot in graph.aget_state_history({"configurable": {"thread_id": thread_id}}):
        values = snapshot.values or {}
        key = (values.get("question"), values.get("started_at"))
        if snapshot.next or not values.get("answer") or key in seen:
            continue  # newest first: a run's last checkpoint comes before its earlier ones
        seen.add(key)
        turns.append({"question": str(values["question"]), "answer": str(values["answer"])})
    return turns[::-1]


def page_routes(councils: Councils) -> list[BaseRoute]:
    """The page's own routes over the server's `councils` (the API key guards them too)."""
    from collective.serve.openai_shapes import error_body
    from collective.serve.runs import thread_key

    async def thread(request: Request) -> Response:
        name = request.path_params["thread"]
        if not name or len(name) > _THREAD_CHARS:
            message = f"a thread name is 1 to {_THREAD_CHARS} characters"
            return JSONResponse(error_body(message), 400)
        turns = await earlier_turns(councils.session.graph, thread_key(name))
        return JSONResponse({"thread": name, "turns": turns})

    return [Route(THREADS_PATH + "/{thread:path}", thread, methods=["GET"])]
