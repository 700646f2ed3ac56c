"""`collective serve` for the page's tests: its own process on 127.0.0.1, stopped by its pid.

It runs in a directory of the test's own (with the council's config) on a free port it reports.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class Serve:
    """`collective serve --port 0` in `cwd`, stopped by its pid."""

    def __init__(self, cwd: Path, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
        self.log = cwd / "serve.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "collective.cli", "serve", "--port", "0", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"),
        )
        self.url = self._url()

    def _url(self) -> str:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = re.search(r"collective serve: (http://\S+)/v1 ", self.log.read_text())
            if found:
                return found.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise AssertionError(f"collective serve did not start: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
