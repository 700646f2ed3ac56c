"""Several equivalent servers for one role (replicas), as one backend.

A replica set is named by the specs of its servers joined by ` | ` (config: a list of specs where
one backend is expected, e.g. `[[specialists]] backend = ["llama-server:http://a:8083",
"llama-server:http://b:8083"]`). Each call is placed by the budgeted call
(`collective.budgeted_call`): on the replica with room (`AdmissionControl.place`, each server's
own pool), planned for that replica's window; a replica that does not answer, or drops the
connection before the call's first token, is skipped and the call runs on another. What a
replica set says about itself as a whole (`health`, `model_check`) holds when any replica
answers; its other methods use the first replica that answers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Unpack

from collective.budget.counting import ChatMessage, TokenCounter
from collective.errors import BackendUnavailable
from collective.models.admission import ServerPool
from collective.models.base import Backend, ChatDelta, ChatOptions, Health

__all__ = ["REPLICA_SEP", "ReplicaFault", "ReplicaSet", "down_replicas", "split_replicas"]

REPLICA_SEP = " | "
"""Joins the specs of a replica set into one spec."""


def split_replicas(spec: str) -> list[str]:
    """The member specs of a spec (one, unless it names a replica set)."""
    return [part.strip() for part in spec.split("|")] if "|" in spec else [spec]


@dataclass(frozen=True)
class ReplicaFault:
    """A replica that failed a call (or a run's check) which went on without it."""

    server: str
    """The replica's spec."""
    failed: str
    """What failed, e.g. `left out: its KV pool could not be read (ConnectError: ...)`."""
    instead: str = ""
    """What was done instead, e.g. `the call ran on llama-server:http://b:8083`."""

    def ran_on(self, server: str) -> ReplicaFault:
        """This fault, saying the call ran on `server` (unless it already says what was done)."""
        return self if self.instead else replace(self, instead=f"the call ran on {server}")

    def describe(self) -> str:
        """One line: `replica SERVER FAILED; INSTEAD`."""
        return f"replica {self.server} {self.failed}" + (
            f"; {self.instead}" if self.instead else ""
        )

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form, with the line (`message`)."""
        return {
            "server": self.server,
            "failed": self.failed,
            "instead": self.instead,
            "message": self.describe(),
        }


class ReplicaSet(Backend):
    """Equivalent servers for one role; `replicas()` lists them for placement per call."""

    def __init__(self, members: Sequence[Backend]) -> None:
        if len(members) < 2:
            raise ValueError("a replica set has at least two members")
        self.members = list(members)
        self.spec = REPLICA_SEP.join(m.spec for m in self.members)
        self.supports_json_schema = all(m.supports_json_schema for m in self.members)
        caps = [m.output_cap for m in self.members if m.output_cap]
        self.output_cap = min(caps) if caps else None

    @property
    def model(self) -> str:
        """The first replica's model as it reports it now (replicas serve the same one)."""
        return self.members[0].model

    @model.setter
    def model(self, value: str) -> None:
        raise AttributeError("a replica set's model is its replicas'")

    @property
    def supports_tools(self) -> bool:
        """Whether every replica renders tools (llama-server learns it from `/props`)."""
        return all(m.supports_tools for m in self.members)

    @supports_tools.setter
    def supports_tools(self, value: bool) -> None:
        raise AttributeError("a replica set's tool support is its replicas'")

    def replicas(self) -> list[Backend]:
        """The member backends, in config order."""
        return list(self.members)

    async def _live(self) -> Backend:
        details = []
        for member in self.members:
            health = await member.health()
            if health.ok:
                return member
            details.append(health.detail)
        raise BackendUnavailable(f"no replica of {self.spec} answers: {'; '.join(details)}")

    async def context_window(self) -> int:
        """The window of the first replica that answers."""
        return await (await self._live()).context_window()

    async def token_counter(self) -> TokenCounter:
        """The counter of the first replica that answers."""
        return await (await self._live()).token_counter()

    async def count_prompt(
        self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None = None
    ) -> int:
        """The count of the first replica that answers."""
        return await (await self._live()).count_prompt(messages, tools)

    async def stream(
        self, messages: Sequence[ChatMessage], **options: Unpack[ChatOptions]
    ) -> AsyncIterator[ChatDelta]:
        """A chat on the first replica that answers (budgeted calls place each call instead)."""
        async for delta in (await self._live()).stream(messages, **options):
            yield delta

    async def pool(self) -> ServerPool | None:
        """None: each replica's own pool is used when a call is placed."""
        return None

    async def health(self) -> Health:
        """Ok when any replica is; the detail names each."""
        checks = [(m, await m.health()) for m in self.members]
        detail = "; ".join(f"{m.spec}: {h.detail}" for m, h in checks)
        return Health(any(h.ok for _, h in checks), detail)

    async def model_check(self) -> Health:
        """Ok when any replica that answers serves the model."""
        checks = [(m, await m.model_check()) for m in self.members if (await m.health()).ok]
        detail = "; ".join(f"{m.spec}: {h.detail}" for m, h in checks) or "no replica answers"
        return Health(any(h.ok for _, h in checks), detail)


async def down_replicas(backend: Backend) -> list[ReplicaFault]:
    """The replicas of `backend` that do not answer while another does (none: not a set).

    A role whose every replica is down is no fault a run survives: the caller refuses it.
    """
    members = backend.replicas()
    if len(members) < 2:
        return []
    checks = [(m, await m.health()) for m in members]
    live = [m.spec for m, h in checks if h.ok]
    if not live:
        return []
    return [
        ReplicaFault(
            m.spec,
            f"does not answer ({' '.join(h.detail.split())})",
            f"the run uses the {len(live)} of {len(members)} replicas that answer "
            f"({', '.join(live)})",
        )
        for m, h in checks
        if not h.ok
    ]
