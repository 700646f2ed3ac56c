"""llama.cpp in process: built for this machine's CPU with AMX off (ops/native-cpu.sh), and
its threads' wait set before the library loads.

The portable wheel (AVX2 only) read prompts 1.5-1.7x slower on this project's AVX-512
machines; a native build with AMX faulted under Firecracker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    pytest.skip("no CPU flags in /proc/cpuinfo")


def _built() -> tuple[set[str], str]:
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    return {
        part.split("=")[0].strip() for part in info.split("|") if part.strip().endswith("1")
    }, info


@pytest.mark.skipif(os.environ.get("COLLECTIVE_CPU", "native") != "native", reason="portable")
def test_wheel_uses_the_cpus_vector_units_and_no_amx() -> None:
    flags = _cpu_flags()
    built, info = _built()
    assert ("AVX2" in built) == ("avx2" in flags), info
    assert ("AVX512" in built) == ("avx512f" in flags), info
    assert ("AVX512_VNNI" in built) == ("avx512_vnni" in flags), info
    assert not {name for name in built if name.startswith("AMX")}, info


@pytest.mark.skipif(os.environ.get("COLLECTIVE_CPU", "native") == "native", reason="native")
def test_a_portable_wheel_uses_its_levels_vector_units_only() -> None:
    """`make portable-test` (COLLECTIVE_CPU=x86-64-v3 or -v2): the wheel it runs on is that
    level's whatever this CPU has, so the tests see other kernels than the native build's."""
    built, info = _built()
    v3 = os.environ["COLLECTIVE_CPU"] == "x86-64-v3"
    assert ("AVX2" in built) == v3 and ("FMA" in built) == v3, info
    assert not {name for name in built if name.startswith(("AVX512", "AMX"))}, info


def _spin_count(env: dict[str, str]) -> str:
    code = (
        "import os, sys, collective.models.llamacpp_in_process\n"
        "assert 'llama_cpp' not in sys.modules  # libgomp reads the variable when it loads\n"
        "print(os.environ.get('GOMP_SPINCOUNT', '-'))"
    )
    keep = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    done = subprocess.run(
        [sys.executable, "-c", code], env=keep | env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_threads_spin_briefly_unless_the_environment_says_how_to_wait() -> None:
    """PASSIVE (the old default) halved generation idle; long spins collapsed it under load."""
    assert _spin_count({}) == "1000"
    assert _spin_count({"OMP_WAIT_POLICY": "PASSIVE"}) == "-"
    assert _spin_count({"GOMP_SPINCOUNT": "50"}) == "50"
