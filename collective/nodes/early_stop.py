"""Early stop: the members still writing are cancelled once the answers that arrived suffice.

With `CouncilContext.agree_early` set, the council's members race the judge's own answer
(`draft`). Each answer that arrives is read in its reduced form, the thing its first line
answers with (`collective.verdict.agreement.reduced_answer`, the KB's names); once `agree_early`
answers (the judge's counted) answer with the same thing, or the judge's own answer is
confident (`confident_at`, `collective.models.confidence.is_confident`), the members still
writing are cancelled. Cancelling a member's call closes its stream: the in-process engine ends
its sequence at the next step and frees its cells, an HTTP server sees the connection close and
frees its slot (`Backend.stream`). A cancelled member's proposal says it was stopped
(`stopped: True`), and the quorum counts the run as decided.

A run's `Race` is found by the key its fan-out gives the members and the draft (`race` in
their input), in this process's table until the quorum closes it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Awaitable
from typing import Any, TypeVar

from langgraph.runtime import Runtime

from collective import agents
from collective.graph.context import CouncilContext
from collective.graph.state import CouncilState
from collective.models.confidence import is_confident
from collective.nodes.chunks import chunks_from_state
from collective.nodes.judge import draft
from collective.verdict.agreement import reduced_answer

__all__ = [
    "Race",
    "StoppedEarly",
    "close_race",
    "new_race",
    "race_of",
    "raced_draft",
]

T = TypeVar("T")

MOST_RACES = 256
"""Races kept at once: a run that dies before its quorum leaves its race behind; the oldest go."""


class StoppedEarly(Exception):
    """A member's call was cancelled because the run had enough answers (the reason)."""


class Race:
    """One run's members still writing, and the answers that arrived (see module).

    Args:
        agree: How many answers naming the same thing stop the rest (None: agreement never does).
    """

    def __init__(self, agree: int | None) -> None:
        self.agree = agree
        self.running: dict[str, asyncio.Task[Any]] = {}
        self.answers: dict[str, str] = {}
        """Who answered -> the thing it answers with (its reduced form)."""
        self.reason: str | None = None
        """Why the members were stopped; None while they run."""

    async def run(self, who: str, call: Awaitable[T]) -> T:
        """Await `call` as member `who`'s; raises `StoppedEarly` where the race stops it.

        Raises:
            StoppedEarly: The run had enough answers before this call ended.
        """
        if self.reason is not None:
            if asyncio.iscoroutine(call):
                call.close()
            raise StoppedEarly(self.reason)
        task = asyncio.ensure_future(call)
        self.running[who] = task
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if (
                self.reason is not None
                and task.cancelled()
                and not (current and current.cancelling())
            ):
                raise StoppedEarly(self.reason) from None
            task.cancel()  # the member itself is cancelled (a timeout, the run): its call too
            raise
        finally:
            self.running.pop(who, None)

    def answered(self, who: str, thing: str | None) -> None:
        """`who`'s answer arrived, answering with `thing` (None: nothing it names)."""
        if thing:
            self.answers[who] = thing
        if self.agree is None or not thing:
            return
        backers = [w for w, t in self.answers.items() if t == thing]
        if len(backers) >= self.agree:
            self.stop(f"{len(backers)} answers agreed on {thing} ({', '.join(backers)})")

    def stop(self, reason: str) -> None:
        """Cancel every member still writing (their calls end; their slots are freed)."""
        if self.reason is not None:
            return
        self.reason = reason
        for task in list(self.running.values()):
            task.cancel()


_races: OrderedDict[str, Race] = OrderedDict()


def new_race(agree: int | None) -> str:
    """A new race's key (the fan-out hands it to the members and the draft)."""
    key = uuid.uuid4().hex
    _races[key] = Race(agree)
    while len(_races) > MOST_RACES:
        _races.popitem(last=False)
    return key


def race_of(key: str | None) -> Race | None:
    """The race of `key`; None without one (early stop off, or closed)."""
    return _races.get(key) if key else None


def close_race(key: str | None) -> Race | None:
    """Forget the race of `key` (the quorum: every member has ended); it, if it was there."""
    return _races.pop(key, None) if key else None


async def raced_draft(state: CouncilState, runtime: Runtime[CouncilContext]) -> dict[str, Any]:
    """The judge's own answer (`nodes.judge.draft`), then what it means for the race.

    Confident (`confident_at`): the members still writing are stopped. Else it counts as one
    answer toward `agree_early`.
    """
    out = await draft(state, runtime)
    race = race_of(state.get("race"))
    if race is None:
        return out
    out["race"] = state["race"]  # for the quorum, which closes it
    own = out.get("own")
    if not own:
        return out
    ctx = runtime.context
    confidence = own.get("confidence")
    if ctx.confident_at is not None and is_confident(confidence, ctx.confident_at):
        lowest = confidence["confidence"]["lowest"]
        race.stop(f"the judge's own answer was confident ({lowest:.2f} >= {ctx.confident_at:g})")
    else:
        chunks = {c.id: c for c in chunks_from_state(state.get("chunks", []))}
        race.answered(agents.JUDGE, reduced_answer(own["text"], chunks, list(own["shown"])))
    return out
