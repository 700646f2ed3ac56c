"""Real servers for the backend integration tests: llama-server and the Ollama-protocol server.

The llama-server binary comes from $COLLECTIVE_LLAMA_SERVER, else from ops/llama-server/build.sh
when it has a cached build. Without a binary the tests fail when $CI is set (CI must exercise
the real server) and are skipped with the reason otherwise.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "ops" / "llama-server" / "build.sh"


def unavailable(reason: str) -> None:
    """Fail under CI, skip elsewhere: CI must not pass without the real parts."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def asked_again(budgets: list[dict[str, Any]]) -> list[str]:
    """The nodes of the calls that asked looping members once more (`nodes.specialist`): a
    real model's answer may be bullets alone on one CPU and not on another."""
    from collective.nodes.specialist import ASKED_AGAIN

    return [b["node"] for b in budgets if any(n.startswith(ASKED_AGAIN) for n in b["notes"])]


def need_llama_cpp() -> None:
    """llama-cpp-python must be importable (fail under CI, skip elsewhere)."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        unavailable(f"llama-cpp-python is not installed: {exc}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cached_build() -> str | None:
    version = os.environ.get("LLAMA_CPP_PYTHON_VERSION", "0.3.36")
    root = os.environ.get("COLLECTIVE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "collective"
    )
    # build.sh caches it under "<version>-<CPU key>"
    built = sorted(Path(root, "llama-server").glob(f"{version}-*/bin/llama-server"))
    return next((str(b) for b in built if os.access(b, os.X_OK)), None)


@pytest.fixture(scope="session")
def llama_server_binary() -> str:
    binary = os.environ.get("COLLECTIVE_LLAMA_SERVER")
    if binary:
        if not os.access(binary, os.X_OK):
            unavailable(f"COLLECTIVE_LLAMA_SERVER={binary} is not an executable")
        return binary
    if _cached_build() is None and not os.environ.get("CI"):
        unavailable(
            "no llama-server binary: set COLLECTIVE_LLAMA_SERVER or build it with "
            "`make llama-server` (ops/llama-server/build.sh, about 7 minutes)"
        )
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=env, check=False
    )
    path = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode != 0 or not os.access(path, os.X_OK):
        unavailable(f"ops/llama-server/build.sh failed: {done.stderr[-2000:]}")
    return path


@pytest.fixture(scope="session")
def gguf_path() -> Path:
    from collective.errors import CollectiveError
    from collective.models.embedded import embedded_model_path

    try:
        return embedded_model_path()
    except CollectiveError as exc:
        unavailable(f"the embedded gemma model is not available: {exc}")
        raise


class ServerProcess:
    """A server subprocess on 127.0.0.1 that can be stopped and started again on its port."""

    def __init__(self, argv: list[str], port: int, ready_path: str, *, name: str) -> None:
        self.argv = argv
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.ready_path = ready_path
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(f"/tmp/collective-test-{name}-{port}.log")

    def start(self, argv: list[str] | None = None, timeout: float = 90.0) -> None:
        if argv is not None:
            self.argv = argv
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{tail}")
            try:
                if httpx.get(self.url + self.ready_path, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.name} was not ready within {timeout}s; see {self.log}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)  # a busy server finishes its batch first
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None


def llama_server_argv(binary: str, model: Path, port: int, ctx: int, parallel: int) -> list[str]:
    return [
        binary,
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        str(ctx),
        "-np",
        str(parallel),
        "-t",
        str(os.cpu_count() or 2),
    ]


def serve_llama_server(binary: str, model: Path, *args: str, name: str) -> ServerProcess:
    """llama-server with `model` on a free port, started with `args` (e.g. `-c 8192`); stop it."""
    port = free_port()
    argv = [binary, "-m", str(model), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["-t", str(os.cpu_count() or 2), *args]
    server = ServerProcess(argv, port, "/health", name=name)
    server.start()
    return server


def serving_llama_server(
    binary: str, model: Path, *args: str, name: str
) -> Iterator[ServerProcess]:
    """`serve_llama_server` for a fixture (`yield from`): the server, stopped afterwards."""
    server = serve_llama_server(binary, model, *args, name=name)
    try:
        yield server
    finally:
        server.stop()


async def required_call(
    backend: Any, tools: list[dict[str, Any]], question: str, cap: int = 64, **context: Any
):
    """The judge's forced first tool round through the seam: `question` as the task, `tools`
    offered with `tool_choice="required"`, `cap` output tokens (`context`: more
    `CouncilContext`)."""
    from collective.budget.assembly import text_section
    from collective.budgeted_call import budgeted_call
    from collective.graph.context import CouncilContext

    return await budgeted_call(
        CouncilContext(output_caps={"judge": cap}, usage_log=None, **context),
        role="judge",
        agent="judge",
        backend=backend,
        contents=[text_section("task", question)],
        compose=lambda s: [{"role": "user", "content": s["task"]}],
        question=question,
        tools=tools,
        tool_choice="required",
    )


@pytest.fixture(scope="module")
def llama_server(llama_server_binary: str, gguf_path: Path) -> Iterator[ServerProcess]:
    """llama-server with the gemma model, `-c 8192 -np 2`: 4,096-token slots."""
    port = free_port()
    server = ServerProcess(
        llama_server_argv(llama_server_binary, gguf_path, port, 8192, 2),
        port,
        "/health",
        name="llama-server",
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


OLLAMA_MODEL = "gemma3:270m"
OLLAMA_CONTEXT_LENGTH = 8192
OLLAMA_DEFAULT_NUM_CTX = 1024  # small, like Ollama's default, and quick on 2 cores
OLLAMA_MODELFILE_NUM_CTX = 3072


@pytest.fixture(scope="module")
def ollama_server(gguf_path: Path) -> Iterator[ServerProcess]:
    """The Ollama-protocol server backed by the real gemma model (blob on this host)."""
    yield from _ollama_protocol_server(gguf_path)


@pytest.fixture(scope="module")
def old_ollama_server(gguf_path: Path) -> Iterator[ServerProcess]:
    """As `ollama_server`, but an Ollama from before `truncate`/`shift`: it always truncates."""
    yield from _ollama_protocol_server(gguf_path, "--old-server")


def _ollama_protocol_server(gguf_path: Path, *extra: str) -> Iterator[ServerProcess]:
    need_llama_cpp()
    port = free_port()
    argv = [
        sys.executable,
        str(REPO / "tests" / "integration" / "ollama_protocol_server.py"),
        "--port",
        str(port),
        "--model-name",
        OLLAMA_MODEL,
        "--context-length",
        str(OLLAMA_CONTEXT_LENGTH),
        "--default-num-ctx",
        str(OLLAMA_DEFAULT_NUM_CTX),
        "--modelfile-num-ctx",
        str(OLLAMA_MODELFILE_NUM_CTX),
        "--model",
        str(gguf_path),
        *extra,
    ]
    server = ServerProcess(argv, port, "/api/version", name="ollama-protocol")
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def council_killing(
    server: ServerProcess,
    question: str,
    context: Any,
    kill_at: Callable[[dict], bool],
    landed: Callable[[dict], bool],
    tries: int = 3,
) -> list[dict]:
    """The council's outputs, `server` killed at the first event `kill_at` accepts in each run.

    A kill can miss what it aims at on a loaded machine (a token decoded but not yet sent, an
    event that arrives after the answer ended), so the run is tried again, up to `tries` times,
    until `landed` accepts its output. The server is started again after each run.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    from collective.config import load_config
    from collective.graph import build_graph
    from collective.models.registry import close_all
    from collective.session import CouncilSession, Watch, run_council

    outs: list[dict] = []
    for attempt in range(tries):
        killed: list[str] = []

        def on_event(event: dict, killed: list[str] = killed) -> None:
            if not killed and kill_at(event):
                assert server.proc is not None
                server.proc.kill()
                server.proc.wait(10)
                killed.append(event["node"])

        session = CouncilSession(build_graph(checkpointer=InMemorySaver()), None,
                                 load_config().config)  # fmt: skip
        try:
            watch, thread = Watch(on_event=on_event), f"kill-{attempt}"
            outs.append(await run_council(session, question, thread, watch=watch, context=context))
        finally:
            await close_all()
            server.proc = None
            server.start()
        assert killed, f"no event of the run was one to kill {server.url} at"
        if landed(outs[-1]):
            break
    return outs
