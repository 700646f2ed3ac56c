"""CLI start-up cost: `collective --help` versus `python -c pass`, median of N runs each.

The ratio is what lazy imports buy: typer and collective's command modules load, but not
LangGraph, llama.cpp, tiktoken or OpenTelemetry. Run: `.venv/bin/python bench/startup.py`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def timed(argv: list[str], runs: int) -> list[float]:
    subprocess.run(argv, capture_output=True, check=True)  # warm the page cache once
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    collective = str(BIN / "collective")
    baseline = timed([sys.executable, "-c", "pass"], args.runs)
    help_ = timed([collective, "--help"], args.runs)
    ask_help = timed([collective, "ask", "--help"], args.runs)
    result = {
        "runs": args.runs,
        "python_pass_ms": statistics.median(baseline),
        "collective_help_ms": statistics.median(help_),
        "collective_ask_help_ms": statistics.median(ask_help),
    }
    result["ratio_help_vs_python"] = result["collective_help_ms"] / result["python_pass_ms"]
    if args.json:
        print(json.dumps(result))
        return
    print(f"median of {args.runs} runs (after one warm-up each)")
    print(f"python -c pass          {result['python_pass_ms']:7.1f} ms")
    print(f"collective --help       {result['collective_help_ms']:7.1f} ms")
    print(f"collective ask --help   {result['collective_ask_help_ms']:7.1f} ms")
    print(f"ratio --help / python   {result['ratio_help_vs_python']:7.2f}x")


if __name__ == "__main__":
    main()
