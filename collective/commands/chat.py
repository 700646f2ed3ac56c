"""`collective chat`: a conversation with one model, and the council on demand.

Plain lines go to the chat model (config `chat`, default the judge's backend) with the
conversation memory; `/collective QUERY` runs the council in the context of the conversation.
Both share one LangGraph thread in the SQLite checkpointer: the council graph's `memory`
channel holds the conversation (chat turns are written to it with `aupdate_state`, as if the
council's `remember` node had recorded them), so `--thread ID` resumes a chat and the council
sees every earlier chat turn.

Every chat turn goes through the council's budgeted call (`collective.budgeted_call`): the chat
plan (default: the specialist preset) fitted to the model's real context, the conversation
summary and the line assembled, refitted once should the server report a smaller window.
"""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Annotated, Any

import typer

from collective import agents
from collective.commands.options import ConfigOption, KbOption, RetrievalOption, missing_kb

if TYPE_CHECKING:
    from rich.console import Console

    from collective.config import CollectiveConfig
    from collective.session import CouncilSession

__all__ = ["HELP", "ChatSession", "chat", "chat_turn"]

HELP = """commands:
  /collective QUERY   ask the council, in the context of this conversation
  /budget             the budget reports of the last turn (one per model call)
  /memory             the memory tiers' usage (L0 working, L1 session, L2 long-term)
  /help               this list
  /exit               leave (the thread is kept; resume with --thread)
anything else goes to the chat model."""


async def chat_turn(
    session: CouncilSession, thread_id: str, line: str
) -> tuple[str, dict[str, Any], list[str]]:
    """One plain chat turn: a budgeted call to the chat model, recorded in the thread's memory.

    The line is checked like a council question (`collective.question`).

    Returns:
        The reply, the call's budget report (`BudgetReport.to_dict()`) and a note for every
        change the check made to the line and every replica the call lost.

    Raises:
        CollectiveError: The line is blank, the backend failed, or the prompt cannot be made to
            fit.
    """
    import asyncio

    from collective.budget.assembly import text_section
    from collective.budgeted_call import budgeted_call
    from collective.memory.conversation import SUMMARY_TOKENS, load_memory
    from collective.models.registry import backend_from_spec
    from collective.prompts import chat as prompt
    from collective.question import check_question

    line, notes = check_question(line)
    config = session.config
    graph_config = {"configurable": {"thread_id": thread_id}}
    snapshot = await session.graph.aget_state(graph_config)
    settings = config.council_context()  # with the chat plan and cap
    scope = settings.memory(thread_id)  # the user's, this thread's L2
    memory = load_memory((snapshot.values or {}).get("memory"), session.store, scope=scope)
    call = await budgeted_call(
        settings,
        role="chat",
        agent=agents.CHAT,
        backend=backend_from_spec(config.chat_backend),
        contents=[
            text_section("system", prompt.SYSTEM),
            text_section("conversation_summary", memory.summary(SUMMARY_TOKENS), keep="end"),
            text_section("task", line),
        ],
        compose=prompt.compose,
        question=line,
    )
    reply = call.result.text.strip()

    def record() -> dict[str, Any]:
        memory.add_turn("user", line)
        memory.add_turn("assistant", reply)
        return memory.to_dict()

    # Compression may archive to the SQLite store: keep it off the event loop.
    data = await asyncio.to_thread(record)
    await session.graph.aupdate_state(graph_config, {"memory": data}, as_node="remember")
    return reply, call.report_dict, [*notes, *(f["message"] for f in call.report.faults)]


class ChatSession:
    """The interactive loop: one event loop for the whole chat, one thread in the checkpointer.

    Args:
        config: The effective settings.
        thread_id: The conversation thread.
        console: Where replies and tables go.
    """

    def __init__(self, config: CollectiveConfig, thread_id: str, console: Console) -> None:
        import asyncio

        self.config = config
        self.thread_id = thread_id
        self.console = console
        self.last_budgets: list[dict[str, Any]] = []
        self._runner = asyncio.Runner()
        self._stack = AsyncExitStack()
        self._session: CouncilSession | None = None

    def run(self) -> None:
        """Read lines until /exit or end of input."""
        from collective.session import open_session

        try:
            self._session = self._runner.run(open_session(self.config, self._stack))
            self._greet()
            while True:
                try:
                    line = input("you> ")
                except EOFError:
                    self.console.print()
                    break
                except KeyboardInterrupt:
                    self.console.print()
                    break
                if not self._handle(line.strip()):
                    break
            self.console.print(
                f"[dim]bye; resume with `collective chat --thread {self.thread_id}`[/dim]"
            )
        finally:
            self._runner.run(self._stack.aclose())
            self._runner.close()

    def _greet(self) -> None:
        assert self._session is not None
        snapshot = self._runner.run(
            self._session.graph.aget_state({"configurable": {"thread_id": self.thread_id}})
        )
        values = snapshot.values or {}
        self.last_budgets = list(values.get("budgets") or [])
        turns = len((values.get("memory") or {}).get("turns", []))
        resumed = f", resumed with {turns} recent turns in memory" if values.get("memory") else ""
        self.console.print(
            f"collective chat · thread {self.thread_id}{resumed} · chat model "
            f"{self.config.chat_backend} · /help for commands",
            highlight=False,
        )
        if snapshot.next:
            self.console.print(
                f"[yellow]this thread has an unfinished council run ({values.get('question')!r}); "
                f"finish it with `collective ask --thread {self.thread_id}` before chatting, or it "
                "is dropped[/yellow]",
                highlight=False,
            )

    def _handle(self, line: str) -> bool:
        """Handle one line; False ends the chat."""
        from collective.errors import CollectiveError

        if not line:
            return True
        command, _, rest = line.partition(" ")
        if line.startswith("/"):
            if command in ("/exit", "/quit"):
                return False
            if command == "/help":
                self.console.print(HELP, highlight=False, markup=False)
                return True
            if command == "/budget":
                self._show_budget()
                return True
            if command == "/memory":
                self._show_memory()
                return True
            if command != "/collective":
                self.console.print(
                    f"unknown command {command}; /help lists the commands", highlight=False
                )
                return True
            if not rest.strip():
                self.console.print("usage: /collective QUERY", highlight=False)
                return True
        try:
            if command == "/collective":
                self._council(rest.strip())
            else:
                assert self._session is not None
                reply, report, notes = self._runner.run(
                    chat_turn(self._session, self.thread_id, line)
                )
                for note in notes:
                    self.console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
                self.last_budgets = [report]
                self.console.print(f"[bold]{report['model']}>[/bold] ", end="")
                self.console.print(reply or "(no answer)", markup=False, highlight=False)
        except CollectiveError as exc:
            self.console.print(f"[red]error:[/red] {' '.join(str(exc).split())}", highlight=False)
        except KeyboardInterrupt:
            self.console.print(
                "[yellow]interrupted; that turn was cancelled (a council run keeps its "
                f"checkpoint: `collective ask --thread {self.thread_id}` finishes it)[/yellow]"
            )
        return True

    def _council(self, query: str) -> None:
        from rich.console import Console

        from collective.commands.render import ProgressView, render_result
        from collective.session import Watch, run_council, start_run

        assert self._session is not None
        session = self._session
        view = ProgressView(
            self.config.members, Console(stderr=True), planned=self.config.planner is not None
        )

        async def go() -> dict[str, Any]:
            # The greeting said that an unfinished council run is dropped by a new question.
            start = await start_run(session, query, self.thread_id, abandon=True)
            watch = Watch(
                on_event=view.event,
                on_finished=lambda node, error: view.finished(node, failed=error),
                on_note=lambda note: self.console.print(f"[dim]{note}[/dim]", highlight=False),
            )
            with view:
                return await run_council(session, query, self.thread_id, watch=watch, start=start)

        result = self._runner.run(go())
        self.last_budgets = list(result.get("budgets") or [])
        render_result(self.console, result, thread_id=None, quiet=True)

    def _show_budget(self) -> None:
        from collective.commands.render import budget_table

        if not self.last_budgets:
            self.console.print("no model call yet on this thread", highlight=False)
            return
        self.console.print(budget_table(self.last_budgets, title="last turn's budgets"))

    def _show_memory(self) -> None:
        from rich.table import Table

        from collective.memory.conversation import load_memory

        assert self._session is not None
        snapshot = self._runner.run(
            self._session.graph.aget_state({"configurable": {"thread_id": self.thread_id}})
        )
        scope = self._session.config.council_context().memory(self.thread_id)
        data = (snapshot.values or {}).get("memory")
        memory = load_memory(data, self._session.store, scope=scope)
        usage = memory.usage()
        table = Table(title="memory", title_justify="left")
        for column in ("tier", "tokens", "capacity", "used"):
            table.add_column(column, justify="left" if column == "tier" else "right")
        for tier in ("L0", "L1"):
            row = usage[tier]
            table.add_row(
                tier, f"{int(row['tokens']):,}", f"{int(row['capacity']):,}", f"{row['pct']:.1f}%"
            )
        l2 = usage["L2"]
        table.add_row("L2", f"{int(l2['tokens']):,}", "store", f"{int(l2['items'])} archived")
        self.console.print(table)
        self.console.print(
            f"{len(memory.turns)} turns in L0, {len(memory.episodes)} episodes in L1",
            highlight=False,
        )


def chat(
    config: ConfigOption = None,
    thread: Annotated[
        str | None, typer.Option("--thread", "-t", help="Resume this conversation thread.")
    ] = None,
    k: Annotated[
        int | None, typer.Option("--k", min=1, max=64, help="Specialists for /collective.")
    ] = None,
    retrieval: RetrievalOption = None,
    kb: KbOption = None,
) -> None:
    """Chat with one model; /collective QUERY asks the council in the conversation's context."""
    from rich.console import Console

    from collective.commands.errors import user_errors
    from collective.errors import ConfigError
    from collective.session import load_settings

    with user_errors():
        if no_kb := missing_kb(kb):
            raise ConfigError(no_kb)
        overrides = {
            "k": k,
            "retrieval": retrieval,
            "kb": str(kb) if kb else None,
        }
        effective = load_settings(config, overrides)
        ChatSession(effective.config, thread or uuid.uuid4().hex[:12], Console()).run()
