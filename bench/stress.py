"""Stress: collective's own llama-server paths under concurrent load, bounded in count and time.

Every call goes through `budgeted_call` (the one place collective calls a model) on the backend
a user's spec names, against the real llama-server on 127.0.0.1, with the small embedded models:

* `n_cmpl -np 2`, `n_cmpl -np 4`: gemma-3-270m on `-np N`. Same-prompt samples as one request
  for N completions (`samples=N` on a server whose `most_samples` is N: the request's `n`, the
  server's `n_cmpl`) while plain requests of other prompts run at the same time.
* `router`: one router (`--models-preset`, no `-m`) serving gemma-3-270m and Qwen2.5-Coder
  0.5B with `--models-max 1`, each named by `?model=`; requests for both at once (an `n_cmpl`
  one each among them), so the router unloads one model and loads the other while requests
  wait. The loads and unloads the router logged are in the notes.
* `slot-restore`: Qwen2.5-Coder 0.5B (gemma-3's sliding-window layers keep no prompt to
  reuse) on `-np 3 --slot-save-path`, named with `?kv=per-slot`. Each
  round a planner's call on a long shared prefix, then `before_fan_out` (the planner's slot
  saved to a file and restored into every idle slot, as before a council's members), then one
  member per slot at once on the same prefix: each member's answer must be its answer alone,
  and every member must reuse the prefix (the host prompt cache off, `--cache-ram 0`, so on a
  slot other than the planner's only the restored copy holds it).
* `replicas`: two gemma servers as one replica set (`llama-server:A | llama-server:B`);
  requests at once, and replica A killed (SIGKILL) while it writes an answer. A call lost
  mid-answer is retried once, as a council node retries it (`TRANSIENT_RETRY`); A is started
  again for the next round. Each kill must be named in the run's notes (the calls' `fault`
  events, what `collective ask` prints).

Before the load, each prompt is sent alone at temperature 0; under load every choice (each
completion of an `n_cmpl` request, each plain answer) must be that text exactly. A choice that
differs is counted as interleaved; a choice that never came (a failed call, a missing
completion, a phase out of time) as lost. Overflows: a `ContextOverflow` or `PoolExhausted`, a
refit after the server's overflow, or a server log saying a context was exceeded. Crashes: a
server (or router instance) that exited without being told to, or a call that failed with
anything but a backend error.

Prints one row per phase, then the notes; exits 1 when any interleaved, lost, overflow or crash
count is not 0, or a fault it caused is not named in the notes.
Usage: python bench/stress.py [--rounds 3]
[--phases ncmpl-np2,ncmpl-np4,router,slot-restore,replicas]
[--json FILE] [--logs DIR] [--server-binary PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends import _binary, _port, _start  # noqa: E402  (same folder: llama-server set-up)

from collective.budget.assembly import text_section  # noqa: E402
from collective.budget.plans import ModelBudget  # noqa: E402
from collective.budgeted_call import ModelCall, budgeted_call, reused_tokens  # noqa: E402
from collective.errors import BackendError, ContextOverflow, PoolExhausted  # noqa: E402
from collective.graph.context import CouncilContext  # noqa: E402
from collective.models.admission import AdmissionControl  # noqa: E402
from collective.models.base import Backend  # noqa: E402
from collective.models.embedded import DEFAULT_EMBEDDED, embedded_model_path  # noqa: E402
from collective.models.registry import backend_from_spec, close_all  # noqa: E402
from collective.nodes.retry import TRANSIENT_RETRY, is_transient  # noqa: E402

PHASES = ("ncmpl-np2", "ncmpl-np4", "router", "slot-restore", "replicas")
SYSTEM = "Answer in one or two plain sentences."
PROMPTS = (
    "What is PLA filament made from?",
    "Why does PETG warp less than ABS?",
    "Name two uses of nylon filament.",
    "What does a heated bed do on a 3D printer?",
    "Why is TPU called flexible?",
    "What is the glass transition of a plastic?",
    "How does humidity affect filament?",
    "What is infill in a 3D print?",
    "Why do prints need cooling fans?",
    "What is a brim on a 3D print?",
    "Which plastic survives a hot car better, PLA or ASA?",
    "What is layer adhesion?",
)
PREFIX = "Background for every question: " + " ".join(PROMPTS * 2)
"""A shared prefix long enough to be worth a slot's restore (about 250 tokens)."""
CALL_LIMIT_S = 180.0
"""The longest one call may take (a router may load a model for it first)."""
OVERFLOW_LOG = re.compile(r"exceeds the available context size|Context size has been exceeded")
INSTANCE_EXIT = re.compile(r"instance name=(\S+) exited with status (-?\d+)")
FORCED_STOP = re.compile(r"force-killing model instance name=(\S+) after timeout")


@dataclass
class Phase:
    """What one phase sent, compared and found."""

    name: str
    requests: int = 0
    """Calls sent under load (a retry of a call lost mid-answer is not a new request)."""
    expected: int = 0
    """Choices asked for under load (an `n_cmpl` request asks for N)."""
    compared: int = 0
    """Choices that came back and were compared with the prompt's answer sent alone."""
    interleaved: int = 0
    """Choices whose text differs from the prompt's answer sent alone."""
    overflows: int = 0
    crashes: int = 0
    retries: int = 0
    """Calls retried after a transient failure (expected only where a replica is killed)."""
    caused: int = 0
    """Faults the harness caused on purpose (a replica killed)."""
    named: int = 0
    """Of those, the ones the run's notes name."""
    notes: list[str] = field(default_factory=list)
    """The run's notes: the faults collective reported, and what the phase did."""
    problems: list[str] = field(default_factory=list)
    """Each count that is not 0, described."""

    @property
    def lost(self) -> int:
        """Choices asked for that never came back."""
        return self.expected - self.compared

    @property
    def ok(self) -> bool:
        """Nothing interleaved, lost, overflowed or crashed; every fault caused is named."""
        bad = self.interleaved + self.lost + self.overflows + self.crashes
        return bad == 0 and self.named == self.caused and not self.problems

    def row(self) -> str:
        """The phase's line of the table."""
        faults = f"{self.named}/{self.caused}"
        return (
            f"{self.name:<10} {self.requests:>8} {self.compared:>8} {self.interleaved:>11} "
            f"{self.lost:>4} {self.overflows:>9} {self.crashes:>7} {self.retries:>7} {faults:>11}"
        )


HEADER = (
    f"{'phase':<10} {'requests':>8} {'compared':>8} {'interleaved':>11} {'lost':>4} "
    f"{'overflows':>9} {'crashes':>7} {'retried':>7} {'named/fault':>11}"
)


class Server:
    """A llama-server (or router) this harness started: stopped, killed, restarted by its pid."""

    def __init__(self, name: str, binary: str, model: Path | None, args: list[str], logs: Path):
        self.name = name
        self.binary = binary
        self.model = model
        self.args = args
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = logs / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed = 0
        """Times the harness killed it on purpose."""
        self._dead = False  # killed by the harness, not started since

    def start(self) -> None:
        """Start it on its port (the same on a restart) and wait for `/health`."""
        self.proc, _ = _start(self.binary, self.model, *self.args, port=self.port, log=self.log)
        self._dead = False

    def kill(self) -> None:
        """SIGKILL, as a crash would stop it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            self.killed += 1
            self._dead = True

    def exited_unasked(self) -> bool:
        """Whether it exited without the harness stopping or killing it."""
        return self.proc is not None and self.proc.poll() is not None and not self._dead

    def stop(self) -> None:
        """Terminate it by its pid (kill after 10 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def log_text(self) -> str:
        """What it wrote so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class Caller:
    """Budgeted calls of one phase: one admission control, temperature 0, the run's notes."""

    def __init__(self, phase: Phase, max_tokens: int, task: int = 192) -> None:
        self.phase = phase
        self.admission = AdmissionControl()
        plan = ModelBudget("chat", 1024, 64 + task, max_tokens, {"system": 64, "task": task})
        self.ctx = CouncilContext(budgets={"chat": plan}, temperature=0.0, usage_log=None)

    def on_event(self, agent: str) -> Callable[[dict[str, Any]], None]:
        """Keep each fault a call reports, as the run's notes show it."""

        def hear(event: dict[str, Any]) -> None:
            if event.get("type") == "fault":
                self.phase.notes.append(f"{agent}: {event['message']}")

        return hear

    async def ask(
        self,
        backend: Backend,
        prompt: str,
        *,
        agent: str,
        samples: int = 1,
        on_token: Callable[[str], Awaitable[None] | None] | None = None,
    ) -> ModelCall:
        """One budgeted call (bounded in time), retried once where a council node would be."""
        for attempt in range(1, TRANSIENT_RETRY.max_attempts + 1):
            try:
                async with asyncio.timeout(CALL_LIMIT_S):
                    call = await budgeted_call(
                        self.ctx,
                        role="chat",
                        agent=agent,
                        backend=backend,
                        contents=[text_section("system", SYSTEM), text_section("task", prompt)],
                        compose=lambda s: [
                            {"role": "system", "content": s["system"]},
                            {"role": "user", "content": s["task"]},
                        ],
                        question=prompt,
                        samples=samples,
                        admission=self.admission,
                        on_event=self.on_event(agent),
                        on_token=on_token,
                    )
            except BackendError as error:
                if is_transient(error) and attempt < TRANSIENT_RETRY.max_attempts:
                    self.phase.retries += 1
                    self.phase.notes.append(f"{agent}: retried after {type(error).__name__}")
                    continue
                raise
            if call.overflow is not None:
                self.phase.overflows += 1
                self.phase.problems.append(f"{agent}: refitted after {call.overflow}")
            return call
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def references(
        self, backend: Backend, rounds: list[list[tuple[str, int]]]
    ) -> dict[str, str]:
        """The answer of each prompt the rounds send, sent alone, one after another."""
        prompts = dict.fromkeys(p for sends in rounds for p, _ in sends)
        return {p: (await self.ask(backend, p, agent="alone")).result.text for p in prompts}

    async def load(
        self,
        backend: Backend,
        sends: list[tuple[str, int]],
        references: dict[str, str],
        *,
        label: str,
        on_token: Callable[[str], Awaitable[None] | None] | None = None,
    ) -> list[ModelCall | BaseException]:
        """`sends` (prompt, samples) at once; every choice compared with its reference."""
        self.phase.requests += len(sends)
        self.phase.expected += sum(n for _, n in sends)
        calls = [
            self.ask(backend, p, agent=f"{label}-{i}", samples=n, on_token=on_token)
            for i, (p, n) in enumerate(sends)
        ]
        done = await asyncio.gather(*calls, return_exceptions=True)
        for (prompt, samples), out in zip(sends, done, strict=True):
            if isinstance(out, BaseException):
                self._failed(prompt, out)
                continue
            texts = [out.result.text, *(s.text for s in out.result.samples)]
            if len(texts) != samples:
                self.phase.problems.append(f"{prompt!r}: {len(texts)} of {samples} completions")
            for i, text in enumerate(texts[:samples]):
                self.phase.compared += 1
                if text != references[prompt]:
                    self.phase.interleaved += 1
                    self.phase.problems.append(
                        f"{prompt!r} choice {i}: {text!r} differs from its answer alone "
                        f"{references[prompt]!r}"
                    )
        return done

    def _failed(self, prompt: str, error: BaseException) -> None:
        if isinstance(error, ContextOverflow | PoolExhausted):
            self.phase.overflows += 1
        elif not isinstance(error, BackendError | TimeoutError):
            self.phase.crashes += 1  # collective itself failed
        self.phase.problems.append(f"{prompt!r}: {type(error).__name__}: {error}")


def rotate(prompts: tuple[str, ...], start: int, n: int) -> list[str]:
    """`n` prompts from `start` on, round the list."""
    return [prompts[(start + i) % len(prompts)] for i in range(n)]


def check_logs(phase: Phase, servers: list[Server]) -> None:
    """Overflows and crashes the servers' own logs (and exits) show."""
    for server in servers:
        text = server.log_text()
        for line in OVERFLOW_LOG.findall(text):
            phase.overflows += 1
            phase.problems.append(f"{server.name} logged: {line}")
        forced = FORCED_STOP.findall(text)
        for name, status in INSTANCE_EXIT.findall(text):
            if status == "0":
                continue
            if name in forced:  # the router's own unload: it kills what does not stop in time
                forced.remove(name)
                phase.notes.append(
                    f"{server.name}: unloading {name}, the router force-killed it after its "
                    f"stop timed out (exit {status})"
                )
                continue
            phase.crashes += 1
            phase.problems.append(f"{server.name}: instance {name} exited with {status}")
        if server.exited_unasked():
            phase.crashes += 1
            assert server.proc is not None
            phase.problems.append(f"{server.name} exited with {server.proc.returncode}")


async def ncmpl(phase: Phase, server: Server, slots: int, rounds: int) -> None:
    """Two `n_cmpl` requests of N and four plain ones at once, per round."""
    caller = Caller(phase, max_tokens=32)
    backend = backend_from_spec(f"llama-server:{server.url}")
    most = await backend.most_samples()
    if most != slots:
        phase.problems.append(f"most_samples is {most}, not {slots}: no n_cmpl request")
    loads = []
    for r in range(rounds):
        prompts = rotate(PROMPTS, 6 * r, 6)
        loads.append([(p, slots) for p in prompts[:2]] + [(p, 1) for p in prompts[2:]])
    references = await caller.references(backend, loads)
    for r, sends in enumerate(loads):
        await caller.load(backend, sends, references, label=f"round{r + 1}")
    phase.notes.append(f"n_cmpl requests asked for {slots} completions each (most_samples {most})")


async def router(phase: Phase, server: Server, rounds: int, names: tuple[str, str]) -> None:
    """Three requests for each model at once (one of them `n_cmpl` 2), per round."""
    caller = Caller(phase, max_tokens=24)
    backends = {n: backend_from_spec(f"llama-server:{server.url}?model={n}") for n in names}
    loads: dict[str, list[list[tuple[str, int]]]] = {n: [] for n in names}
    for r in range(rounds):
        for i, name in enumerate(names):
            prompts = rotate(PROMPTS, 3 * r + i, 3)
            loads[name].append([(prompts[0], 2), *((p, 1) for p in prompts[1:])])
    references = {n: await caller.references(backends[n], loads[n]) for n in names}
    before = server.log_text()

    async def model_load(name: str, r: int) -> None:
        sends = loads[name][r]
        await caller.load(backends[name], sends, references[name], label=f"{name}-round{r + 1}")

    for r in range(rounds):
        await asyncio.gather(*(model_load(n, r) for n in names))
    during = server.log_text()[len(before) :]
    loaded = len(re.findall(r"spawning server instance with name=", during))
    unloaded = len(INSTANCE_EXIT.findall(during))  # each unload ends with its instance's exit
    phase.notes.append(
        f"the router loaded a model {loaded} times and unloaded one {unloaded} times"
    )
    if loaded < 2 or unloaded < 1:
        phase.problems.append("the router did not switch models under load")


async def slot_restore(phase: Phase, server: Server, slots: int, rounds: int) -> None:
    """A planner's call, its slot restored into the idle ones, then a member per slot at once."""
    caller = Caller(phase, max_tokens=24, task=512)
    backend = backend_from_spec(f"llama-server:{server.url}?kv=per-slot")
    loads = [
        [(f"{PREFIX}\n\nQuestion: {p}", 1) for p in rotate(PROMPTS, slots * r, slots)]
        for r in range(rounds)
    ]
    references = await caller.references(backend, loads)
    planner = f"{PREFIX}\n\nQuestion: name the topic of these questions in one word."
    reused = 0
    async with httpx.AsyncClient(timeout=30) as http:
        for r, sends in enumerate(loads):
            for slot in range(slots):  # what the calls before left in the slots: gone
                await http.post(f"{server.url}/slots/{slot}?action=erase")
            await caller.ask(backend, planner, agent=f"round{r + 1}-planner")
            await backend.before_fan_out()
            done = await caller.load(backend, sends, references, label=f"round{r + 1}")
            shared = len(PREFIX) // 8  # well under the prefix's tokens, over a template's
            reused += sum(
                not isinstance(c, BaseException) and (reused_tokens(c.result) or 0) > shared
                for c in done
            )
    members = rounds * slots
    phase.notes.append(
        f"{reused} of {members} members reused the planner's prefix (the host cache off: "
        "on a slot other than the planner's, only its restored copy holds it)"
    )
    if reused < members:
        phase.problems.append(f"only {reused} of {members} members reused the planner's prefix")


def generating(slots: Any) -> bool:
    """Whether a slot in a `/slots` answer is writing an answer (decoded a token)."""

    def decoded(slot: dict[str, Any]) -> int:
        nxt = slot.get("next_token") or {}
        return int((nxt[0] if isinstance(nxt, list) else nxt).get("n_decoded", 0))

    return isinstance(slots, list) and any(s.get("is_processing") and decoded(s) for s in slots)


async def replicas(phase: Phase, a: Server, b: Server, rounds: int) -> None:
    """Six requests at once over the two replicas per round; A killed mid-answer, restarted."""
    caller = Caller(phase, max_tokens=48)
    backend = backend_from_spec(f"llama-server:{a.url} | llama-server:{b.url}")
    loads = [[(p, 1) for p in rotate(PROMPTS, 6 * r, 6)] for r in range(rounds)]
    references = await caller.references(backend, loads)
    killing = asyncio.Lock()
    http = httpx.AsyncClient(timeout=5)

    async def kill_when_a_writes(text: str) -> None:
        if a.killed > phase.caused or killing.locked():
            return
        async with killing:
            if a.killed > phase.caused:
                return
            try:
                slots = (await http.get(a.url + "/slots")).json()
            except (httpx.HTTPError, ValueError):
                return
            if generating(slots):
                a.kill()
                phase.notes.append(f"harness: killed replica A ({a.url}) while it wrote an answer")

    try:
        for r, sends in enumerate(loads):
            start = len(phase.notes)
            await caller.load(
                backend, sends, references, label=f"round{r + 1}", on_token=kill_when_a_writes
            )
            if a.killed > phase.caused:
                phase.caused += 1
                named = [n for n in phase.notes[start:] if f"replica llama-server:{a.url}" in n]
                if any("failed mid-answer" in n for n in named):
                    phase.named += 1
                else:
                    phase.problems.append(f"round {r + 1}: the kill of A is not named: {named}")
                a.start()  # on its port: the replica set's spec names it
            else:
                phase.problems.append(f"round {r + 1}: A was never caught writing; not killed")
    finally:
        await http.aclose()


async def run_phase(name: str, binary: str, rounds: int, logs: Path) -> Phase:
    """Start the phase's servers, run it (bounded), stop them; the phase's figures."""
    phase = Phase(name)
    gemma = embedded_model_path("gemma-3-270m")
    # The gemma GGUF ships no chat template: Gemma's turns, as ops/llama-server/launch.sh gives.
    template = resources.files("collective") / "data/templates/gemma.jinja"
    # Each token computed on its own in its slot's own KV (`-ub 1`, no unified KV): an answer
    # then comes out the same whatever else the server runs beside it, so a choice that differs
    # from its prompt's answer alone is the client's doing, not the batch's floating point.
    alone = ["-ub", "1", "--no-kv-unified"]
    servers: list[Server] = []
    limit = 120 + 90 * rounds
    try:
        async with asyncio.timeout(limit):
            if name.startswith("ncmpl-np"):
                slots = int(name.removeprefix("ncmpl-np"))
                args = ["-c", str(1024 * slots), "-np", str(slots)]
                args += ["--chat-template-file", str(template), *alone]
                servers = [Server(name, binary, gemma, args, logs)]
                servers[0].start()
                await ncmpl(phase, servers[0], slots, rounds)
            elif name == "router":
                names = ("small", "member")
                preset = logs / "models.ini"
                qwen = embedded_model_path(DEFAULT_EMBEDDED)
                preset.write_text(
                    f"version = 1\n[*]\nnp = 2\nt = {os.cpu_count() or 2}\nub = 1\n"
                    f"[{names[0]}]\nmodel = {gemma}\nc = 2048\nchat-template-file = {template}\n"
                    f"[{names[1]}]\nmodel = {qwen}\nc = 2048\njinja = true\n"
                )
                args = ["--models-preset", str(preset), "--models-max", "1"]
                servers = [Server(name, binary, None, args, logs)]
                servers[0].start()
                await router(phase, servers[0], rounds, names)
            elif name == "slot-restore":
                saved = logs / "slots"
                saved.mkdir(exist_ok=True)
                args = ["-c", str(1024 * 3), "-np", "3", "--slot-save-path", str(saved)]
                args += ["--cache-ram", "0", "--jinja", *alone]
                # Qwen: gemma-3's sliding-window layers keep no prompt to reuse
                qwen = embedded_model_path(DEFAULT_EMBEDDED)
                servers = [Server(name, binary, qwen, args, logs)]
                servers[0].start()
                await slot_restore(phase, servers[0], 3, rounds)
            elif name == "replicas":
                args = ["-c", "2048", "-np", "2", "--chat-template-file", str(template), *alone]
                servers = [Server(f"replica-{n}", binary, gemma, args, logs) for n in "AB"]
                for server in servers:
                    server.start()
                await replicas(phase, servers[0], servers[1], rounds)
            else:
                raise ValueError(f"unknown phase {name!r}: use {', '.join(PHASES)}")
    except TimeoutError:
        phase.problems.append(f"the phase ran out of its {limit} s")
    finally:
        await close_all()
        check_logs(phase, servers)
        for server in servers:
            server.stop()
    if phase.retries and name != "replicas":
        phase.problems.append(f"{phase.retries} calls failed once with no fault caused")
    return phase


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of load per phase")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--server-binary")
    parser.add_argument("--logs", type=Path, help="keep the servers' logs in this folder")
    args = parser.parse_args()
    binary = args.server_binary or _binary()
    phases: list[Phase] = []
    with tempfile.TemporaryDirectory(prefix="collective-stress-") as scratch:
        logs = args.logs or Path(scratch)
        logs.mkdir(parents=True, exist_ok=True)
        for name in args.phases.split(","):
            started = time.monotonic()
            phase = asyncio.run(run_phase(name, binary, args.rounds, logs))
            phase.notes.append(f"{time.monotonic() - started:.0f} s")
            phases.append(phase)
            print(f"{name}: done, ok={phase.ok}", file=sys.stderr, flush=True)
    print(f"rounds {args.rounds}; load {os.getloadavg()[0]:.2f}; cpus {os.cpu_count()}")
    print(HEADER)
    for phase in phases:
        print(phase.row())
    for phase in phases:
        for line in phase.notes + [f"PROBLEM: {p}" for p in phase.problems]:
            print(f"  {phase.name}: {line}")
    if args.json:
        rows = [asdict(p) | {"lost": p.lost, "ok": p.ok} for p in phases]
        args.json.write_text(json.dumps({"rounds": args.rounds, "phases": rows}, indent=1))
    return 0 if all(p.ok for p in phases) else 1


if __name__ == "__main__":
    sys.exit(main())
