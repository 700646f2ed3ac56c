"""L0/L1/L2 tiered conversation memory with compression that never loses what must survive.

* **L0 working memory** (8,000 tokens): the current tasks and the recent conversation turns,
  verbatim. At 80% it is compressed: completed tasks' steps and the older conversation are
  summarized into episodes archived to L1; the current task context (active tasks and the most
  recent turns, up to `keep_fraction` of L0) stays in full.
* **L1 session memory** (32,000 tokens): task episodes (a header `[id] description -> outcome`
  plus a summary of its steps), summaries of older conversation, and the pinned key decisions
  (a verdict's `Decision:` lines). At 80%, selective compression: the 3-5 most
  recent completed tasks, the decisions and active tasks stay in full, older episodes shrink to
  their header (and a short summary for conversation). Past 100%, the oldest completed episodes
  are archived to L2 until L1 is back under `archive_to` of capacity.
* **L2 long-term memory**: archived episodes in a LangGraph `BaseStore` (the one given: SQLite
  or Postgres, see `collective.memory.store`; a process-local in-memory store when none is),
  under the memory's `namespace`, which the council builds from the user id and the thread.

Each tier emits one warning event when it reaches 70% (re-armed when it drops below). After
every compression the must-survive set (key decisions, active tasks, and every completed task's
id somewhere in L0/L1/L2) is checked against the rendered tiers; a loss raises
`MemoryIntegrityError`.

The whole state is plain data (`to_dict` / `from_dict`), so a LangGraph graph can keep it in its
state between turns; token counts are never stored, they are recounted by the (memoising)
counter.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from collective.budget.counting import TokenCounter
from collective.errors import CollectiveError
from collective.memory.summarize import ExtractiveSummarizer, Summarizer

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

DECISION_SHARE = 0.25
"""The share of L1 pinned decisions may take; older decisions move to L2."""

__all__ = [
    "L0_CAPACITY",
    "L1_CAPACITY",
    "CompressionRecord",
    "Episode",
    "MemoryEvent",
    "MemoryIntegrityError",
    "MemoryMetrics",
    "MemoryStateError",
    "TaskEntry",
    "TierMetrics",
    "TieredMemory",
    "Turn",
]

Tier = Literal["L0", "L1", "L2"]

L0_CAPACITY = 8_000
"""L0 working-memory size in tokens, unless a run sets `l0_capacity`."""

L1_CAPACITY = 32_000
"""L1 session-memory size in tokens, unless a run sets `l1_capacity`."""

_MAX_EVENTS = 200
"""Events kept in state (oldest dropped), so a long session's state stays small."""


class MemoryStateError(CollectiveError):
    """A memory call that does not fit the session's state (e.g. completing an unknown task)."""

    exit_code = 2


class MemoryIntegrityError(CollectiveError):
    """Compression lost something that must survive; a bug in compression or the summarizer."""


@dataclass
class Turn:
    """One conversation turn in L0."""

    role: str
    text: str
    task_id: str | None = None
    """The task active when the turn was added."""

    def render(self) -> str:
        """The turn as it appears in memory text."""
        return f"{self.role}: {self.text}"


@dataclass
class TaskEntry:
    """A task whose context lives in L0 (active, or completed and not yet archived to L1)."""

    id: str
    description: str
    status: Literal["active", "completed"] = "active"
    outcome: str = ""

    def render(self) -> str:
        """The task as it appears in memory text."""
        if self.status == "active":
            return f"[{self.id}] (active) {self.description}"
        return f"[{self.id}] (done) {self.description} -> {self.outcome}"


@dataclass
class Episode:
    """A summary in L1: of one completed task, or of older conversation."""

    id: str
    kind: Literal["task", "conversation"]
    header: str
    """`[id] description -> outcome` for a task; `[conv-N] Earlier conversation` otherwise."""
    body: str = ""
    """The summary of the steps or turns (empty once a task episode is compressed)."""
    compressed: bool = False

    def render(self) -> str:
        """The episode as it appears in memory text."""
        return f"{self.header}: {self.body}" if self.body else self.header


@dataclass
class MemoryEvent:
    """Something the memory did or noticed."""

    tier: Tier
    kind: Literal["warning", "compression", "archive", "over_capacity"]
    message: str
    usage_pct: float


@dataclass
class TierMetrics:
    """Compression figures of one tier, accumulated over the session."""

    compressions: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    seconds: float = 0.0

    @property
    def tokens_saved(self) -> int:
        """Tokens removed from the active context by this tier's compressions."""
        return self.tokens_before - self.tokens_after

    @property
    def ratio(self) -> float:
        """Tokens after / tokens before (1.0 before any compression)."""
        return self.tokens_after / self.tokens_before if self.tokens_before else 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures, derived ones included."""
        return {**asdict(self), "tokens_saved": self.tokens_saved, "ratio": round(self.ratio, 4)}


@dataclass
class MemoryMetrics:
    """Compression metrics per tier, plus what went to L2."""

    l0: TierMetrics = field(default_factory=TierMetrics)
    l1: TierMetrics = field(default_factory=TierMetrics)
    archived: int = 0
    """Episodes archived to L2."""
    archived_tokens: int = 0
    """Tokens those episodes had in L1."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready metrics."""
        return {
            "L0": self.l0.to_dict(),
            "L1": self.l1.to_dict(),
            "L2": {"archived": self.archived, "archived_tokens": self.archived_tokens},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryMetrics:
        """Rebuild from `to_dict` output."""

        def tier(d: dict[str, Any]) -> TierMetrics:
            return TierMetrics(
                d["compressions"], d["tokens_before"], d["tokens_after"], d["seconds"]
            )

        l2 = data.get("L2", {})
        return cls(
            tier(data["L0"]), tier(data["L1"]), l2.get("archived", 0), l2.get("archived_tokens", 0)
        )


@dataclass
class CompressionRecord:
    """The last compression (kept in memory only, not in `to_dict`)."""

    tier: Tier
    tokens_before: int
    tokens_after: int
    seconds: float
    output: str
    """The compressed text the compression produced (for benchmarks and debugging)."""


class TieredMemory:
    """L0 working, L1 session and L2 long-term memory for one conversation session.

    Args:
        counter: Counts tokens (the model's own counter wherever possible).
        store: The L2 store; None keeps L2 in the process's in-memory store (no files).
        session_id: Names the L2 namespace `("collective", "memory", session_id)` unless
            `namespace` is given.
        namespace: The L2 namespace (e.g. `("collective", "memory", user_id, thread_id)`).
        summarizer: `(text, max_tokens) -> summary`; default `ExtractiveSummarizer(counter)`.
        l0_capacity: L0 size in tokens.
        l1_capacity: L1 size in tokens.
        warn_at: Fraction of a tier that emits the warning event.
        compress_at: Fraction of a tier that triggers its compression.
        keep_fraction: Share of L0 the recent turns of the current task context may keep.
        archive_to: Fraction of L1 that archiving to L2 brings it down to.
        keep_recent: Completed task episodes kept in full by L1 compression (at most).
        min_recent: ... and at least, when keeping `keep_recent` is not enough.
        task_summary_tokens: Size of a task episode's step summary.
        conversation_summary_tokens: Size of an older-conversation episode.
        compressed_tokens: Size of a compressed episode.
        summary_ratio: A summary's size as a share of its source (between `compressed_tokens`
            and the limits above), so that compression always shrinks.
    """

    def __init__(
        self,
        counter: TokenCounter,
        store: BaseStore | None = None,
        *,
        session_id: str = "default",
        namespace: tuple[str, ...] | None = None,
        summarizer: Summarizer | None = None,
        l0_capacity: int = L0_CAPACITY,
        l1_capacity: int = L1_CAPACITY,
        warn_at: float = 0.70,
        compress_at: float = 0.80,
        keep_fraction: float = 0.40,
        archive_to: float = 0.75,
        keep_recent: int = 5,
        min_recent: int = 3,
        task_summary_tokens: int = 200,
        conversation_summary_tokens: int = 300,
        compressed_tokens: int = 40,
        summary_ratio: float = 0.25,
    ) -> None:
        if not 0 < warn_at <= compress_at <= 1:
            raise ValueError("need 0 < warn_at <= compress_at <= 1")
        if not 0 < min_recent <= keep_recent:
            raise ValueError("need 0 < min_recent <= keep_recent")
        self.counter = counter
        self._store = store
        self.session_id = session_id
        self.namespace = namespace or ("collective", "memory", session_id)
        self.summarizer = summarizer or ExtractiveSummarizer(counter)
        self.l0_capacity, self.l1_capacity = l0_capacity, l1_capacity
        self.warn_at, self.compress_at = warn_at, compress_at
        self.keep_fraction, self.archive_to = keep_fraction, archive_to
        self.keep_recent, self.min_recent = keep_recent, min_recent
        self.task_summary_tokens = task_summary_tokens
        self.conversation_summary_tokens = conversation_summary_tokens
        self.compressed_tokens = compressed_tokens
        self.summary_ratio = summary_ratio

        self.turns: list[Turn] = []
        self.tasks: dict[str, TaskEntry] = {}
        self.episodes: list[Episode] = []
        self.decisions: list[str] = []
        self.l2_keys: list[str] = []
        self.events: list[MemoryEvent] = []
        self.metrics = MemoryMetrics()
        self.last_compression: CompressionRecord | None = None
        self._warned: set[str] = set()
        self._conversations = 0

    # -- recording ---------------------------------------------------------------------------

    @property
    def current_task(self) -> str | None:
        """The most recently begun task still active, if any."""
        active = [t.id for t in self.tasks.values() if t.status == "active"]
        return active[-1] if active else None

    def add_turn(self, role: str, text: str) -> None:
        """Add a conversation turn to L0 (tagged with the current task)."""
        self.turns.append(Turn(role, text, self.current_task))
        self._maintain()

    def begin_task(self, task_id: str, description: str) -> None:
        """Start a task; its context stays in L0 in full while it is active.

        Raises:
            MemoryStateError: If the id was used before in this session.
        """
        if task_id in self.tasks or task_id in self.l2_keys or self._episode(task_id):
            raise MemoryStateError(f"task id {task_id!r} is already used in this session")
        # A task description is context, not a document: cap it so one task cannot fill L0.
        description = self.counter.head(description, self.l0_capacity // 8)
        self.tasks[task_id] = TaskEntry(task_id, description)
        self._maintain()

    def complete_task(self, task_id: str, outcome: str) -> None:
        """Mark an active task completed; it is summarized into L1 at the next L0 compression.

        Raises:
            MemoryStateError: If no such task is active.
        """
        task = self.tasks.get(task_id)
        if task is None or task.status != "active":
            raise MemoryStateError(
                f"task {task_id!r} is not active; begin_task it first (active: "
                f"{', '.join(t.id for t in self.tasks.values() if t.status == 'active') or 'none'})"
            )
        task.status, task.outcome = "completed", self.counter.head(outcome, self.l0_capacity // 8)
        self._maintain()

    def record_decision(self, text: str) -> None:
        """Pin a key decision in L1 (once); it stays in full through every compression.

        Pinned decisions take at most `DECISION_SHARE` of L1: past it, the oldest move to L2.
        """
        if text in self.decisions:
            return
        self.decisions.append(text)
        count = self.counter.count
        while len(self.decisions) > 1 and (
            sum(count(d) for d in self.decisions) > DECISION_SHARE * self.l1_capacity
        ):
            oldest = self.decisions.pop(0)
            self.metrics.archived += 1
            self.metrics.archived_tokens += count(oldest)
            key = f"decision-{self.metrics.archived}"
            value = {
                "id": key,
                "kind": "decision",
                "text": oldest,
                "archived_at": datetime.now(UTC).isoformat(),
            }
            self.store.put(self.namespace, key, value)
        self._maintain()

    # -- reading -----------------------------------------------------------------------------

    def l0_tokens(self) -> int:
        """Tokens in L0: current and completed tasks' entries plus the turns."""
        count = self.counter.count
        return sum(count(t.render()) for t in self.tasks.values()) + sum(
            count(t.render()) for t in self.turns
        )

    def l1_tokens(self) -> int:
        """Tokens in L1: episodes plus the pinned decisions."""
        count = self.counter.count
        return sum(count(e.render()) for e in self.episodes) + sum(count(d) for d in self.decisions)

    def usage(self) -> dict[str, dict[str, float]]:
        """Per-tier tokens, capacity and percentage (L2: archived episodes)."""
        l0, l1 = self.l0_tokens(), self.l1_tokens()
        return {
            "L0": {"tokens": l0, "capacity": self.l0_capacity, "pct": 100 * l0 / self.l0_capacity},
            "L1": {"tokens": l1, "capacity": self.l1_capacity, "pct": 100 * l1 / self.l1_capacity},
            "L2": {"items": len(self.l2_keys), "tokens": self.metrics.archived_tokens},
        }

    def summary(self, max_tokens: int) -> str:
        """The council's conversation-summary section, built from L1 + L0 within `max_tokens`.

        Claims, in priority order: active tasks; the most recent turns verbatim (up to 40% of
        the allocation); key decisions (newest first);
        tasks completed since the last L0 compression; L1 episodes (newest first); then more
        recent turns if room is left. The text is laid
        out oldest to newest and counted exactly; lowest-priority lines go until it fits.
        """
        if max_tokens <= 0:
            return ""
        count = self.counter.count
        chosen: dict[str, list[tuple[int, str]]] = {
            k: [] for k in ("episodes", "decisions", "tasks", "turns")
        }
        order: list[tuple[str, int]] = []  # claim order, so the last claimed is dropped first
        used = sum(count(h) + 1 for h in _HEADINGS.values())

        def claim(section: str, index: int, line: str, limit: int) -> bool:
            nonlocal used
            cost = count(line) + 1
            if used + cost > limit:
                return False
            used += cost
            chosen[section].append((index, line))
            order.append((section, index))
            return True

        tasks = list(self.tasks.values())
        for i, task in enumerate(tasks):
            if task.status == "active":
                claim("tasks", i, f"- {task.render()}", max_tokens)
        turn_limit = used + int(0.4 * max_tokens)
        taken = len(self.turns)
        for i in range(len(self.turns) - 1, -1, -1):
            if not claim("turns", i, self.turns[i].render(), min(turn_limit, max_tokens)):
                break
            taken = i
        for i in range(len(self.decisions) - 1, -1, -1):
            claim("decisions", i, f"- {self.decisions[i]}", max_tokens)
        for i in range(len(tasks) - 1, -1, -1):
            if tasks[i].status == "completed":
                claim("tasks", i, f"- {tasks[i].render()}", max_tokens)
        for i in range(len(self.episodes) - 1, -1, -1):
            claim("episodes", i, f"- {self.episodes[i].render()}", max_tokens)
        for i in range(taken - 1, -1, -1):
            if not claim("turns", i, self.turns[i].render(), max_tokens):
                break

        text = self._layout(chosen)
        while order and count(text) > max_tokens:
            section, index = order.pop()
            chosen[section] = [(i, s) for i, s in chosen[section] if i != index]
            text = self._layout(chosen)
        return text if count(text) <= max_tokens else self.counter.head(text, max_tokens)

    def _layout(self, chosen: dict[str, list[tuple[int, str]]]) -> str:
        parts = []
        if self.l2_keys and chosen["episodes"]:
            parts.append(f"({len(self.l2_keys)} older tasks are in long-term memory.)")
        for section, heading in _HEADINGS.items():
            lines = [line for _, line in sorted(chosen[section])]
            if lines:
                parts.append(heading + "\n" + "\n".join(lines))
        return "\n\n".join(parts)

    def recall(self, task_id: str) -> dict[str, Any] | None:
        """An episode archived to L2, by task id (None if not archived)."""
        if task_id not in self.l2_keys:
            return None
        item = self.store.get(self.namespace, task_id)
        return None if item is None else dict(item.value)

    # -- maintenance -------------------------------------------------------------------------

    @property
    def store(self) -> BaseStore:
        """The L2 store (the process's in-memory store when none was given)."""
        if self._store is None:
            from collective.memory.store import process_store

            self._store = process_store()
        return self._store

    def _maintain(self) -> None:
        self._check_warnings()
        if self.l0_tokens() >= self.compress_at * self.l0_capacity:
            self._compress_l0()
        if self.l1_tokens() >= self.compress_at * self.l1_capacity:
            self._compress_l1()
        if self.l1_tokens() > self.l1_capacity:
            self._archive_l1()
        self._check_warnings()

    def _event(self, tier: Tier, kind: Any, message: str, pct: float) -> None:
        self.events.append(MemoryEvent(tier, kind, message, round(pct, 2)))
        del self.events[:-_MAX_EVENTS]

    def _check_warnings(self) -> None:
        tiers: tuple[tuple[Tier, int, int], ...] = (
            ("L0", self.l0_tokens(), self.l0_capacity),
            ("L1", self.l1_tokens(), self.l1_capacity),
        )
        for tier, tokens, capacity in tiers:
            pct = 100 * tokens / capacity
            if tokens >= self.warn_at * capacity and tier not in self._warned:
                self._warned.add(tier)
                self._event(tier, "warning", f"{tier} at {pct:.1f}% ({tokens}/{capacity})", pct)
            elif tokens < self.warn_at * capacity:
                self._warned.discard(tier)

    def _compress_l0(self) -> None:
        start, before = time.perf_counter(), self.l0_tokens()
        snapshot = self._must_survive()
        count = self.counter.count
        active = {t.id for t in self.tasks.values() if t.status == "active"}
        keep_budget = int(self.keep_fraction * self.l0_capacity)
        kept, used = 0, 0  # the current task context: newest turns of active tasks (or no task)
        for turn in reversed(self.turns):
            cost = count(turn.render())
            if (
                turn.task_id is not None and turn.task_id not in active
            ) or used + cost > keep_budget:
                break
            kept, used = kept + 1, used + cost
        old = self.turns[: len(self.turns) - kept]
        completed = [t for t in self.tasks.values() if t.status == "completed"]
        if not old and not completed:
            return  # all of L0 is current task context; nothing may be compressed
        self.turns = self.turns[len(self.turns) - kept :]

        new: list[Episode] = []
        loose = [t for t in old if t.task_id not in {c.id for c in completed}]
        if loose:
            self._conversations += 1
            text = "\n".join(t.render() for t in loose)
            body = self._summarize(text, self._target(text, self.conversation_summary_tokens))
            new.append(Episode(f"conv-{self._conversations}", "conversation", "", body))
            new[-1].header = f"[{new[-1].id}] Earlier conversation"
        for task in completed:
            steps = "\n".join(t.render() for t in old if t.task_id == task.id)
            body = self._summarize(steps, self._target(steps, self.task_summary_tokens))
            header = f"[{task.id}] {task.description} -> {task.outcome}"
            new.append(Episode(task.id, "task", header, body))
            del self.tasks[task.id]
        self.episodes.extend(new)

        after = self.l0_tokens() + sum(count(e.render()) for e in new)
        output = "\n".join([*(e.render() for e in new), *(t.render() for t in self.tasks.values())])
        output = "\n".join([output, *(t.render() for t in self.turns)])
        self._record("L0", before, after, start, output, snapshot)
        if self.l0_tokens() >= self.compress_at * self.l0_capacity:
            pct = 100 * self.l0_tokens() / self.l0_capacity
            self._event(
                "L0",
                "over_capacity",
                f"L0 still at {pct:.1f}% after compression: the active tasks' context is kept "
                "in full; complete some tasks",
                pct,
            )

    def _compress_l1(self) -> None:
        start, before = time.perf_counter(), self.l1_tokens()
        snapshot = self._must_survive()
        target = self.compress_at * self.l1_capacity
        for keep in range(self.keep_recent, self.min_recent - 1, -1):
            protected = {e.id for e in [e for e in self.episodes if e.kind == "task"][-keep:]}
            for episode in self.episodes:
                if episode.compressed or episode.id in protected:
                    continue
                if episode.kind == "task":
                    episode.header = self.counter.head(episode.header, self.compressed_tokens)
                    episode.body = ""
                else:
                    episode.body = self._summarize(episode.body, self.compressed_tokens)
                episode.compressed = True
            if self.l1_tokens() < target:
                break
        after = self.l1_tokens()
        if after < before:
            self._record("L1", before, after, start, self._render_l1(), snapshot)

    def _archive_l1(self) -> None:
        before = self.l1_tokens()
        snapshot = self._must_survive()
        protected = {
            e.id for e in [e for e in self.episodes if e.kind == "task"][-self.min_recent :]
        }
        count = self.counter.count
        tokens, archived = before, 0
        for episode in list(self.episodes):
            if tokens <= self.archive_to * self.l1_capacity:
                break
            if episode.id in protected:
                continue
            value = {
                "id": episode.id,
                "kind": episode.kind,
                "text": episode.render(),
                "archived_at": datetime.now(UTC).isoformat(),
            }
            self.store.put(self.namespace, episode.id, value)
            self.episodes.remove(episode)
            self.l2_keys.append(episode.id)
            tokens -= count(episode.render())
            self.metrics.archived += 1
            self.metrics.archived_tokens += count(episode.render())
            archived += 1
        after = self.l1_tokens()
        pct = 100 * after / self.l1_capacity
        if archived:
            self._event(
                "L2", "archive", f"archived {archived} episodes ({before - after} tokens)", pct
            )
        if after > self.l1_capacity:
            self._event(
                "L1",
                "over_capacity",
                f"L1 still at {pct:.1f}%: pinned decisions and the "
                f"{self.min_recent} most recent tasks take {after} tokens",
                pct,
            )
        self._verify(snapshot)

    def _target(self, text: str, limit: int) -> int:
        """A summary's size: `summary_ratio` of the source, at least `compressed_tokens`."""
        if not text:
            return 0
        return min(
            limit, max(self.compressed_tokens, int(self.summary_ratio * self.counter.count(text)))
        )

    def _summarize(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        summary = self.summarizer(text, max_tokens).strip()
        # A pluggable (LLM) summarizer may overrun; the budget is not negotiable.
        return (
            summary
            if self.counter.count(summary) <= max_tokens
            else self.counter.head(summary, max_tokens)
        )

    def _record(
        self,
        tier: Literal["L0", "L1"],
        before: int,
        after: int,
        start: float,
        output: str,
        snapshot: dict[str, set[str]],
    ) -> None:
        self._verify(snapshot)
        seconds = time.perf_counter() - start
        metrics = self.metrics.l0 if tier == "L0" else self.metrics.l1
        metrics.compressions += 1
        metrics.tokens_before += before
        metrics.tokens_after += after
        metrics.seconds += seconds
        self.last_compression = CompressionRecord(tier, before, after, seconds, output)
        now, capacity = (
            (self.l0_tokens(), self.l0_capacity)
            if tier == "L0"
            else (self.l1_tokens(), self.l1_capacity)
        )
        pct = 100 * now / capacity
        self._event(tier, "compression", f"{tier} compressed {before} -> {after} tokens", pct)

    # -- integrity ---------------------------------------------------------------------------

    def _episode(self, task_id: str) -> Episode | None:
        return next((e for e in self.episodes if e.id == task_id), None)

    def _render_l1(self) -> str:
        return "\n".join(
            [
                *(e.render() for e in self.episodes),
                *self.decisions,
            ]
        )

    def _must_survive(self) -> dict[str, set[str]]:
        return {
            "decisions": set(self.decisions),
            "active_tasks": {t.id for t in self.tasks.values() if t.status == "active"},
            "tasks": {
                *self.tasks,
                *(e.id for e in self.episodes if e.kind == "task"),
                *self.l2_keys,
            },
        }

    def _verify(self, snapshot: dict[str, set[str]]) -> None:
        """Check the must-survive items against the tiers' rendered entries.

        Raises:
            MemoryIntegrityError: Naming every item that disappeared.
        """
        l0 = {t.render() for t in self.tasks.values()}
        l1 = {e.render() for e in self.episodes} | set(self.decisions)
        ids = {*self.tasks, *(e.id for e in self.episodes), *self.l2_keys}
        missing = [f"decision {d!r}" for d in snapshot["decisions"] if d not in l1]
        missing += [
            f"active task {t!r}"
            for t in snapshot["active_tasks"]
            if t not in self.tasks or self.tasks[t].render() not in l0
        ]
        missing += [f"task {t!r}" for t in snapshot["tasks"] if t not in ids]
        if missing:
            raise MemoryIntegrityError(
                "memory compression lost what must survive: "
                + "; ".join(sorted(missing))
                + ". This is a bug in the compression or the summarizer; please report it."
            )

    # -- state -------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The whole state as JSON-ready data (the store and counter are not included)."""
        return {
            "version": 1,
            "session_id": self.session_id,
            "config": {
                "l0_capacity": self.l0_capacity,
                "l1_capacity": self.l1_capacity,
                "warn_at": self.warn_at,
                "compress_at": self.compress_at,
                "keep_fraction": self.keep_fraction,
                "archive_to": self.archive_to,
                "keep_recent": self.keep_recent,
                "min_recent": self.min_recent,
                "task_summary_tokens": self.task_summary_tokens,
                "conversation_summary_tokens": self.conversation_summary_tokens,
                "compressed_tokens": self.compressed_tokens,
                "summary_ratio": self.summary_ratio,
            },
            "turns": [asdict(t) for t in self.turns],
            "tasks": [asdict(t) for t in self.tasks.values()],
            "episodes": [asdict(e) for e in self.episodes],
            "decisions": list(self.decisions),
            "l2_keys": list(self.l2_keys),
            "events": [asdict(e) for e in self.events],
            "metrics": self.metrics.to_dict(),
            "warned": sorted(self._warned),
            "conversations": self._conversations,
        }

    @classmethod
    def from_dict(
        cls,
        data: dict[str, Any],
        counter: TokenCounter,
        store: BaseStore | None = None,
        summarizer: Summarizer | None = None,
        namespace: tuple[str, ...] | None = None,
    ) -> TieredMemory:
        """Rebuild a memory from `to_dict` output (`namespace`: its L2 namespace now).

        Raises:
            MemoryStateError: If the data is not a memory state this version can read.
        """
        if not isinstance(data, dict) or data.get("version") != 1:
            raise MemoryStateError(
                "memory state is missing or from another version; start a new session"
            )
        memory = cls(
            counter,
            store,
            session_id=data["session_id"],
            namespace=namespace,
            summarizer=summarizer,
            **data["config"],
        )
        memory.turns = [Turn(**t) for t in data["turns"]]
        memory.tasks = {t["id"]: TaskEntry(**t) for t in data["tasks"]}
        memory.episodes = [Episode(**e) for e in data["episodes"]]
        memory.decisions = list(data["decisions"])  # (older states' empty artifact lists: unread)
        memory.l2_keys = list(data["l2_keys"])
        memory.events = [MemoryEvent(**e) for e in data["events"]]
        memory.metrics = MemoryMetrics.from_dict(data["metrics"])
        memory._warned = set(data["warned"])
        memory._conversations = data["conversations"]
        return memory


_HEADINGS = {
    "episodes": "Earlier in the session:",
    "decisions": "Key decisions:",
    "tasks": "Current tasks:",
    "turns": "Recent conversation:",
}
