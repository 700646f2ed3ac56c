"""`collective serve` and `collective mcp` as real processes on 127.0.0.1, for the tests and bench.

Each is started with `--port 0`, found by the URL it prints on stderr, and stopped by its own pid.
Beside them, replies for the scripted model server (tests/agent_server/scripted_openai.py) whose
judge cites the first chunk its prompt shows and adds a line that chunk does not support.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.agent_server.scripted_openai import REPLIES, ScriptedOpenAIServer

CHUNK = re.compile(r"\[KB#([\w.:-]+)\] \[Score: [0-9.]+\] [^\n:]*: ([^\n]+)")
UNSUPPORTED = "The same filament also survives 9999 C in an oven"
"""A line the judge adds that no chunk supports: the claim check leaves it out."""


def citing_judge(prompt: str) -> str:
    """The judge's answer: the first shown chunk's first sentence, cited, and one unsupported line.

    Prompts without chunks (the claim check's fix call) get the same shape of answer.
    """
    found = CHUNK.search(prompt)
    if not found:
        return "Use ASA: it keeps its shape in a hot car."
    tag, text = found.group(1), found.group(2)
    sentence = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0].rstrip(".")
    return f"{sentence} [KB#{tag}].\n{UNSUPPORTED} [KB#{tag}]."


def model_server(latency_s: float = 0.2) -> ScriptedOpenAIServer:
    """A scripted OpenAI-protocol model server whose judge cites (started)."""
    return ScriptedOpenAIServer(
        latency_s=latency_s, replies={**REPLIES, "judge": citing_judge}
    ).start()


def council_config(directory: Path, models: ScriptedOpenAIServer, *, k: int = 2) -> Path:
    """A config file: `k` specialists and the judge on the scripted server."""
    path = directory / "collective.toml"
    path.write_text(
        f'k = {k}\njudge = "{models.spec("judge")}"\n'
        f'[[specialists]]\nbackend = "{models.spec("specialist")}"\ncount = {k}\n'
    )
    return path


class Process:
    """A started `collective serve`/`mcp`: its URL (from its stderr) and how to stop it."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        command = [sys.executable, "-m", "collective.cli", *args]
        self.proc = subprocess.Popen(
            command,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.url = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            found = re.match(r"collective (?:serve|mcp): (http://[\d.]+:\d+)", line)
            if found and not self.url:
                self.url = found.group(1)
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float = 180) -> Process:
        if not self._ready.wait(timeout) or not self.url:
            self.stop()
            raise RuntimeError("the server did not start:\n" + "".join(self.lines))
        return self

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        return self.proc.returncode


def wait_for(check, timeout: float = 60, interval: float = 0.05) -> bool:
    """Poll `check()` until true (True) or `timeout` seconds passed (False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(interval)
    return bool(check())
