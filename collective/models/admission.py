"""Admission control: a council fits each server's KV pool, not only each prompt.

A council sends K requests at once, often to one server. Each prompt is planned to fit the slot
the server reports, but the requests share what the server really has:

* llama-server started without `-np` (its default) or with `--kv-unified` runs several slots
  over ONE pool of `-c` tokens, and `/props` reports the whole `-c` as every slot's `n_ctx`.
  When the requests in flight together outgrow the pool, llama.cpp fails *every* active slot
  with HTTP 500 `Context size has been exceeded.` (`PoolExhausted`).
* Ollama runs `OLLAMA_NUM_PARALLEL` requests per loaded model, each with the loaded
  `context_length`; further requests queue in the server.
* llama.cpp in this process runs one request at a time.

Each backend describes its server as a `ServerPool` (`Backend.pool()`). `AdmissionControl`
reserves every call's prompt + output tokens against its server's pool before the call is sent
and releases them when it ends: a call that would not fit waits (its progress says `waiting for
KV room on <server>`) instead of being sent, so the sum of in-flight reservations never exceeds
the pool. Calls to independent slots, or to different servers, do not wait for each other.

Nothing llama-server serves tells a unified pool from independent slots of the same size: for
`-c 8192 -np 4 --kv-unified` and `-c 32768 -np 4`, `/props`, `/slots`, `/metrics` and
`/v1/models` are identical (`total_slots` 4, every slot `n_ctx` 8,192, `meta.n_ctx` 8,192,
`n_ctx_train` the model's); only the start-up log says `kv_unified`. (`-c 8192 -np 4` without
`--kv-unified` reports 2,048 per slot: the slots split `-c`.) So several slots are read as one
unified pool of one slot's size, the safe reading; a server with independent slots says so in
its spec: `llama-server:URL?kv=per-slot`.

Pools are re-read from the server at most every `POOL_TTL_S` seconds, at once after a failed
request or a pool exhaustion, and whenever the server's answer differs from what was planned
for (a restart with other slots): never only after an overflow.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collective.models.base import Backend

__all__ = [
    "KV_LOG_FIELD",
    "KV_POOL_MODES",
    "POOL_TTL_S",
    "AdmissionControl",
    "Reservation",
    "ServerPool",
    "default_admission",
]

log = logging.getLogger(__name__)

POOL_TTL_S = 2.0
"""Longest time (seconds) a backend trusts what it read about its server's slots and pool.

Reading llama-server's `/props` or Ollama's `/api/ps` costs a millisecond on a local server, so
each council run plans against what the server reports now: a server restarted with smaller
slots is noticed before the next call is planned, not after an overflow or a cut answer."""

KV_LOG_FIELD = "kv_reservation"
"""The attribute every log record of `AdmissionControl.reserve` carries: a dict with `event`
(`wait`, `admit` or `release`), `server`, `label`, `tokens` (the call's reservation),
`in_flight` (tokens held on the server after the event) and `pool` (the pool's size), so a log
handler can replay the reservations in flight at any moment."""

KV_POOL_MODES = ("auto", "unified", "per-slot")
"""How a llama-server's slots share KV memory: `auto` reads one slot as its own pool and
several slots as one unified pool; `unified` and `per-slot` say it outright."""


@dataclass(frozen=True)
class ServerPool:
    """How many requests a server runs at once and the KV tokens they share."""

    server: str
    """Which server (its URL, or `in-process:<model>`): the key reservations are held under."""
    slots: int
    """Requests the server runs at once."""
    slot_ctx: int
    """Tokens one request may use (prompt + output): the `n_ctx` each slot reports."""
    tokens: int
    """KV tokens shared by all requests in flight."""
    unified: bool
    """Whether the slots share one pool (each slot could take all of it)."""
    source: str
    """Where this was read (e.g. `/props`, `/api/ps`), and any assumption made."""

    def describe(self) -> str:
        """One line for reports, e.g. `4 slots sharing one 8,192-token KV pool (unified)`."""
        if self.slots == 1:
            shape = f"1 slot of {self.slot_ctx:,} tokens"
        elif self.unified:
            shape = (
                f"{self.slots} slots sharing one {self.tokens:,}-token KV pool (unified; each "
                f"request up to {self.slot_ctx:,})"
            )
        else:
            shape = f"{self.slots} independent slots of {self.slot_ctx:,} tokens"
        return f"{self.server}: {shape}; read from {self.source}"  # no [..]: rich markup

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "server": self.server,
            "slots": self.slots,
            "slot_ctx": self.slot_ctx,
            "tokens": self.tokens,
            "unified": self.unified,
            "source": self.source,
        }


@dataclass
class Reservation:
    """Tokens one call holds on a server while it runs."""

    label: str
    tokens: int
    since: float


@dataclass
class _ServerState:
    pool: ServerPool
    held: dict[int, Reservation]
    queue: collections.deque[int]

    @property
    def used(self) -> int:
        return sum(r.tokens for r in self.held.values())

    def fits(self, ticket: int, tokens: int) -> bool:
        return (
            self.queue[0] == ticket
            and len(self.held) < self.pool.slots
            and (not self.held or self.used + tokens <= self.pool.tokens)
        )


def _fields(event: str, state: _ServerState, label: str, tokens: int) -> dict[str, Any]:
    """The `KV_LOG_FIELD` of one admission log record."""
    fields = {
        "event": event,
        "server": state.pool.server,
        "label": label,
        "tokens": tokens,
        "in_flight": state.used,
        "pool": state.pool.tokens,
    }
    return {KV_LOG_FIELD: fields}


OnWait = Callable[[str], None]
"""Receives `waiting for KV room on <server> ...` when a call has to wait."""


class AdmissionControl:
    """Per-server admission: calls reserve prompt + output tokens against their server's pool.

    Waiting is first come, first served per server, so a large call is not starved by small
    ones. A call that may run on any of several equivalent servers (replicas, `place`) takes
    the one with the most room now, and waits in every one's queue until one has room: it never
    waits on a full server while another has room. `records` keeps the latest admissions
    (server, tokens in flight after admitting, pool size) and `peak` the most tokens ever in
    flight per server, for logs and tests.
    """

    def __init__(self, history: int = 1000) -> None:
        self._states: dict[tuple[int, str], _ServerState] = {}
        self._conds: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Condition]] = {}
        self._unpooled: collections.Counter[int] = collections.Counter()
        self.records: collections.deque[tuple[str, int, int]] = collections.deque(maxlen=history)
        self.peak: dict[str, int] = {}
        self._shared: set[str] = set()
        self._tickets = itertools.count()

    def exhausted(self, pool: ServerPool | None) -> None:
        """Learn from a pool exhaustion that `pool`'s slots share one pool after all."""
        if pool is not None and not pool.unified and pool.slots > 1:
            log.warning("%s ran out of KV pool: its slots are treated as one pool", pool.server)
            self._shared.add(pool.server)

    def _cond(self) -> asyncio.Condition:
        # asyncio primitives belong to one event loop; each loop gets its own books.
        loop = asyncio.get_running_loop()
        entry = self._conds.get(id(loop))
        if entry is None or entry[0] is not loop:
            entry = self._conds[id(loop)] = (loop, asyncio.Condition())
        return entry[1]

    def _state(self, pool: ServerPool) -> _ServerState:
        if pool.server in self._shared and not pool.unified:
            source = pool.source + ", shared: learnt from a pool exhaustion"
            pool = replace(pool, tokens=pool.slot_ctx, unified=True, source=source)
        key = (id(asyncio.get_running_loop()), pool.server)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = _ServerState(pool, {}, collections.deque())
        state.pool = pool  # the latest reading rules (a restarted server)
        return state

    def in_flight(self, server: str) -> int:
        """Tokens held on `server` now (this event loop)."""
        try:
            loop_id = id(asyncio.get_running_loop())
        except RuntimeError:
            return 0
        state = self._states.get((loop_id, server))
        return state.used if state else 0

    @asynccontextmanager
    async def reserve(
        self,
        backend: Backend,
        tokens: int,
        *,
        label: str = "",
        on_wait: OnWait | None = None,
    ) -> AsyncIterator[ServerPool | None]:
        """Hold `tokens` of `backend`'s server pool while the body runs.

        Yields the pool the reservation was made against (None: the backend reports none, and
        the call is sent at once). A request larger than the whole pool waits until it runs
        alone; the backend then refuses what cannot fit its slot.
        """
        async with self.place([backend], tokens, label=label, on_wait=on_wait) as (_, pool):
            yield pool

    @asynccontextmanager
    async def place(
        self,
        backends: Sequence[Backend],
        tokens: int,
        *,
        label: str = "",
        on_wait: OnWait | None = None,
        on_left_out: Callable[[Backend, Exception], None] | None = None,
    ) -> AsyncIterator[tuple[Backend, ServerPool | None]]:
        """Hold `tokens` on whichever of `backends` (equivalent servers) has room first.

        Yields the backend chosen and its pool. Of those with room now, the one with the most
        free tokens; else one that reports no pool (it queues by itself; the one with fewest
        calls here); else the first that frees room. `on_left_out` hears each backend left out
        because its pool could not be read, with the error.

        Raises:
            BackendError: Every backend failed to report its pool (the first one's error).
        """
        pools, errors = await self._pools(backends)
        if not pools and errors:
            raise errors[0][1]
        for backend, error in errors:
            if on_left_out is not None:
                on_left_out(backend, error)
        unpooled = [b for b, pool in pools if pool is None]
        states = [(b, self._state(pool)) for b, pool in pools if pool is not None]
        if not states or (unpooled and not self._room_now(states, tokens)):
            chosen = min(unpooled, key=lambda b: self._unpooled[id(b)])
            self._unpooled[id(chosen)] += 1
            try:
                yield chosen, None
            finally:
                self._unpooled[id(chosen)] -= 1
            return
        backend, state, need, ticket = await self._admit(states, tokens, label, on_wait)
        try:
            yield backend, state.pool
        finally:
            state.held.pop(ticket, None)
            log.info(
                "released %s: %d tokens on %s, %d of %d in flight",
                label or "a call",
                need,
                state.pool.server,
                state.used,
                state.pool.tokens,
                extra=_fields("release", state, label, need),
            )
            cond = self._cond()
            async with cond:
                cond.notify_all()

    @staticmethod
    async def _pools(
        backends: Sequence[Backend],
    ) -> tuple[list[tuple[Backend, ServerPool | None]], list[tuple[Backend, Exception]]]:
        """Each backend's pool; with several, one that fails to answer is left out (with why)."""
        if len(backends) == 1:
            return [(backends[0], await backends[0].pool())], []
        read = await asyncio.gather(*(b.pool() for b in backends), return_exceptions=True)
        pools: list[tuple[Backend, ServerPool | None]] = []
        errors: list[tuple[Backend, Exception]] = []
        for backend, pool in zip(backends, read, strict=True):
            if isinstance(pool, BaseException):
                if not isinstance(pool, Exception):
                    raise pool
                log.warning("%s is left out of placement: %s", backend.spec, pool)
                errors.append((backend, pool))
            else:
                pools.append((backend, pool))
        return pools, errors

    @staticmethod
    def _room_now(states: Sequence[tuple[Backend, _ServerState]], tokens: int) -> bool:
        return any(
            not s.queue
            and len(s.held) < s.pool.slots
            and (not s.held or s.used + min(tokens, s.pool.tokens) <= s.pool.tokens)
            for _, s in states
        )

    async def _admit(
        self,
        states: Sequence[tuple[Backend, _ServerState]],
        tokens: int,
        label: str,
        on_wait: OnWait | None,
    ) -> tuple[Backend, _ServerState, int, int]:
        """Wait in every state's queue until one fits; hold the tokens there."""
        ticket = next(self._tickets)  # unique: waiters are told apart by it
        cond = self._cond()

        def fitting() -> list[tuple[Backend, _ServerState]]:
            ready = [(b, s) for b, s in states if s.fits(ticket, min(tokens, s.pool.tokens))]
            return sorted(ready, key=lambda bs: bs[1].used - bs[1].pool.tokens)

        async with cond:
            for _, state in states:
                state.queue.append(ticket)
            try:
                if not fitting():
                    pool = states[0][1].pool
                    where = " or ".join(s.pool.server for _, s in states)
                    message = (
                        f"waiting for KV room on {where}: {label or 'a call'} needs "
                        f"{min(tokens, pool.tokens):,} tokens, {states[0][1].used:,} of "
                        f"{pool.tokens:,} are in flight ({len(states[0][1].held)}/{pool.slots} "
                        "slots busy)"
                    )
                    log.info("%s", message, extra=_fields("wait", states[0][1], label, tokens))
                    if on_wait is not None:
                        on_wait(message)
                    await cond.wait_for(lambda: bool(fitting()))
                backend, state = fitting()[0]
            finally:
                for _, each in states:
                    each.queue.remove(ticket)
                cond.notify_all()
            need = min(tokens, state.pool.tokens)
            state.held[ticket] = Reservation(label, need, time.monotonic())
            used = state.used
        pool = state.pool
        self.records.append((pool.server, used, pool.tokens))
        self.peak[pool.server] = max(self.peak.get(pool.server, 0), used)
        log.info(
            "admitted %s: %d tokens on %s, %d of %d in flight (%d/%d slots)",
            label or "a call",
            need,
            pool.server,
            used,
            pool.tokens,
            len(state.held),
            pool.slots,
            extra=_fields("admit", state, label, need),
        )
        return backend, state, need, ticket


_default = AdmissionControl()


def default_admission() -> AdmissionControl:
    """The process-wide admission control every budgeted call uses unless given another."""
    return _default
