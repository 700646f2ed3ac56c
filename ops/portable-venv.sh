#!/usr/bin/env bash
# A virtualenv that runs collective on a portable llama.cpp build (docs/portable-build.md):
# usage `COLLECTIVE_CPU=x86-64-v3 PYTHON=.venv/bin/python bash ops/portable-venv.sh DIR`.
# DIR gets its own site-packages holding only the llama-cpp-python wheel built for that level
# (ops/llama-cpp-python/build-wheel.sh, cached), ahead of $PYTHON's environment (everything
# else, collective included), so every process started with DIR/bin/python, tests' subprocesses
# too, loads the portable llama.cpp. Prints DIR/bin/python; progress goes to stderr.
set -euo pipefail
case "${COLLECTIVE_CPU:-}" in
  x86-64-v3 | x86-64-v2) ;;
  *) echo "COLLECTIVE_CPU must name a portable level (x86-64-v3 or x86-64-v2)" >&2; exit 2 ;;
esac
dir="${1:?usage: COLLECTIVE_CPU=LEVEL PYTHON=.venv/bin/python bash ops/portable-venv.sh DIR}"
python="${PYTHON:-python3}"
wheel="$(bash "$(dirname "$0")/llama-cpp-python/build-wheel.sh")"

rm -rf "$dir"
"$python" -m venv --without-pip "$dir"
own="$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
base="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$python" -m pip install --quiet --no-deps --target "$own" "$wheel" >&2
# After its own site-packages: the base environment, its .pth files (the editable collective)
# read as a site directory's are.
echo "import site; site.addsitedir('$base')" >"$own/collective-base.pth"
"$dir/bin/python" - "$own" <<'EOF' >&2
import sys

import llama_cpp

assert llama_cpp.__file__.startswith(sys.argv[1]), llama_cpp.__file__
print(f"portable llama_cpp: {llama_cpp.__file__}")
EOF
echo "$dir/bin/python"
