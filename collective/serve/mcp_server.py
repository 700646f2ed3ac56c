"""`collective mcp`: the council as Model Context Protocol tools (the official `mcp` SDK).

Tools:

* `ask(question, thread, mode, k, retrieval, council)`: a council run; while it goes, a
  progress notification per node that finishes (`progress` of `total`, the message a readable
  line: `specialist-2: done, 118 tokens in 4.1 s`); returns the verdict, its citations, the
  checked claims, notes, the thread and `usage`. Cancelling the call (MCP
  `notifications/cancelled`) cancels the run and its model calls.
* `recall(query, profile)`: the chunks retrieval would inject, with their tags and sources.
* `kb_add(paths)`: files added to the configured KB, and those refused with their reasons; only
  offered with `--kb-add` (it changes the KB, from paths on the server's machine, and only
  Markdown/text files: a caller could otherwise have any readable file put where `recall`
  shows it).

Over stdio an MCP host starts it; over streamable HTTP (`/mcp`) it binds 127.0.0.1 unless told
otherwise and asks for the API key like `collective serve`. Runs are admitted like
`collective serve`'s (`max_concurrent`; one more is a tool error saying when to try again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from collective.agents import Mode
from collective.errors import CollectiveError
from collective.kb.profile_names import Profile
from collective.serve.runs import DEFAULT_COUNCIL, Ask, Busy, Councils, Run, ThreadBusy

if TYPE_CHECKING:
    from collective.config import CollectiveConfig
    from collective.serve.settings import ServeSettings

__all__ = ["MCP_PATH", "build_mcp", "run_mcp"]

MCP_PATH = "/mcp"
"""Where the streamable HTTP transport answers."""


def build_mcp(councils: Councils) -> MCPServer:
    """The MCP server with the tools `ask`, `recall` and (when enabled) `kb_add`.

    Long: each tool is a closure over `councils`, registered with the SDK beside the others.
    """
    server: MCPServer = MCPServer(
        "collective",
        instructions="A local multi-model council: `ask` answers a question from the knowledge "
        "base with cited, checked claims; `recall` shows what the KB holds for a query.",
        log_level="WARNING",
    )

    async def ask(
        question: str,
        ctx: Context,
        thread: str | None = None,
        mode: Mode = Mode.council,
        k: int | None = None,
        retrieval: Profile | None = None,
        council: str = DEFAULT_COUNCIL,
    ) -> dict[str, Any]:
        """Ask the council: the verdict with its citations and checked claims.

        Args:
            question: The question.
            ctx: The MCP request (progress goes there).
            thread: Continue this conversation thread (its memory); none starts a new one.
            mode: council, council-review, council-split, single, self-consistency, self-moa.
            k: Specialists (default: the council's own number).
            retrieval: Retrieval profile: lean, balanced, deep or auto.
            council: A named council of the server (default: the configured one).
        """
        model = council if mode is Mode.council else f"{council}-{Mode(mode).value}"
        try:
            run = councils.start(Ask(question, model, thread, (), k, retrieval))
        except (Busy, ThreadBusy, KeyError, CollectiveError) as exc:
            raise ToolError(str(exc.args[0] if isinstance(exc, KeyError) else exc)) from None
        try:
            result = await _follow(run, ctx)
        except asyncio.CancelledError:
            run.cancel()
            raise
        except Exception as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None
        finally:
            run.cancel()  # ended or cancelled: nothing left to stop, else the run stops
        return {
            "verdict": result.get("answer", ""),
            "citations": list(result.get("citations") or []),
            "claims": list(result.get("claims") or []),
            "unknown_citations": list(result.get("unknown_citations") or []),
            "notes": list(result.get("notes") or []),
            "thread": run.thread,
            "mode": run.entry.mode.value,
            "usage": result["usage"],
        }

    async def recall_tool(
        query: str, profile: Profile = "auto", council: str = DEFAULT_COUNCIL
    ) -> dict[str, Any]:
        """The KB chunks retrieval would give the council for `query`, with tags and sources.

        Args:
            query: What to look for.
            profile: Retrieval profile: lean, balanced, deep or auto.
            council: Whose KB (default: the configured council's).
        """
        return await asyncio.to_thread(_recall, _council(councils, council), query, profile)

    async def kb_add(paths: list[str], council: str = DEFAULT_COUNCIL) -> dict[str, Any]:
        """Add Markdown/text files (or directories of them) to the KB: what was added, refused.

        Args:
            paths: Files or directories on the server's machine.
            council: Whose KB (default: the configured council's).
        """
        config = _council(councils, council)
        return await asyncio.to_thread(_add, config, paths)

    server.add_tool(ask, name="ask")
    server.add_tool(recall_tool, name="recall")
    if councils.settings.kb_add:
        server.add_tool(kb_add, name="kb_add")
    return server


def _council(councils: Councils, name: str) -> CollectiveConfig:
    if name not in councils.configs:
        raise ToolError(f"no council {name!r}; the councils are: {', '.join(councils.configs)}")
    return councils.configs[name]


async def _follow(run: Run, ctx: Context) -> dict[str, Any]:
    """The run's result, with a progress notification for each node that finishes."""
    from collective import agents
    from collective.serve.openai_shapes import progress_line

    total = len(agents.live_rows(run.members, run.planned)) if run.thread_id else None
    done: set[str] = set()
    while True:
        event = await run.events.get()
        if event["type"] == "result":
            return dict(event["result"])
        if event["type"] == "error":
            raise event["exception"]
        finished = (event["type"] == "progress" and event.get("status") in ("done", "failed")) or (
            event["type"] == "finished"
        )
        line = progress_line(event)
        if finished and event.get("node"):
            done.add(str(event["node"]))
        if line:
            await ctx.report_progress(len(done), total, line)


def _recall(config: CollectiveConfig, query: str, profile: Profile) -> dict[str, Any]:
    """What retrieval injects for `query` from the council's KB: each chunk with its tag."""
    from collective.graph.context import open_knowledge
    from collective.kb.retrieval import retrieve

    result = retrieve(open_knowledge(config.council_context()), query, profile)
    return {
        "applied": result.applied,
        "reason": result.reason,
        "chunks": [
            {
                "tag": f"[KB#{chunk.id}]",
                "id": chunk.id,
                "source": chunk.source,
                "heading": chunk.heading,
                "tags": list(chunk.tags),
                "score": chunk.score,
                "text": chunk.text,
            }
            for chunk in result.injected
        ],
    }


def _add(config: CollectiveConfig, paths: list[str]) -> dict[str, Any]:
    """`kb add` without chunk expansions: each path added, or refused with its reason."""
    from pathlib import Path

    from collective.errors import CollectiveError
    from collective.graph.context import open_knowledge
    from collective.kb.sqlite_store import TEXT_SUFFIXES, IngestStats, SqliteKnowledgeStore

    store = open_knowledge(config.council_context())
    if not isinstance(store, SqliteKnowledgeStore):
        raise ToolError("the configured knowledge store is not a SQLite KB: nothing to add to")
    refused: list[dict[str, str]] = []
    stats = IngestStats()
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(
                p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES
            )
        elif path.suffix.lower() not in TEXT_SUFFIXES:  # a tool's caller names any path
            kinds = ", ".join(sorted(TEXT_SUFFIXES))
            refused.append({"path": raw, "reason": f"not a Markdown/text file ({kinds})"})
        elif path.exists():
            files.append(path)
        else:
            refused.append({"path": raw, "reason": "no such file or directory"})
    store.check_model()
    for file in files:
        try:
            stats.merge(store.add_file(file, embed=False))
        except CollectiveError as exc:
            refused.append({"path": str(file), "reason": str(exc)})
    vectors = store.embed_missing()
    return {"kb": str(store.path), **stats.to_dict(), "vectors_added": vectors, "refused": refused}


def run_mcp(
    config: CollectiveConfig,
    settings: ServeSettings,
    *,
    transport: str,
    named: Mapping[str, CollectiveConfig] | None = None,
    on_ready: Callable[[str], None],
    on_note: Callable[[str], None],
) -> None:
    """Serve the tools over `transport` (`stdio` or `http`) until stopped."""
    from collective.serve.server import bind, open_councils

    sock = bind(settings.host, settings.port) if transport == "http" else None

    async def main() -> None:
        async with AsyncExitStack() as stack:
            councils = await open_councils(config, settings, stack, named=named, on_note=on_note)
            server = build_mcp(councils)
            if sock is None:
                await server.run_stdio_async()
                return
            await _serve_http(server, settings, sock, on_ready)

    try:
        asyncio.run(main())
    finally:
        if sock is not None:
            sock.close()


async def _serve_http(
    server: MCPServer, settings: ServeSettings, sock: Any, on_ready: Callable[[str], None]
) -> None:
    import uvicorn

    from collective.serve.app import guard
    from collective.serve.server import url_of

    app = guard(
        server.streamable_http_app(streamable_http_path=MCP_PATH, host=settings.host),
        settings,
        prefixes=(MCP_PATH,),
    )
    config = uvicorn.Config(
        app, lifespan="on", log_level="warning", access_log=False, timeout_graceful_shutdown=5
    )
    http = uvicorn.Server(config)

    async def ready() -> None:
        while not http.started:
            await asyncio.sleep(0.02)
        on_ready(url_of(sock))

    waiter = asyncio.get_running_loop().create_task(ready())
    try:
        await http.serve(sockets=[sock])
    finally:
        waiter.cancel()
