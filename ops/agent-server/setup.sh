#!/usr/bin/env bash
# The Agent Server's own Python 3.12 environment: `bash ops/agent-server/setup.sh` prints its
# python. Aegra needs Python 3.12 or newer; the project's .venv may be older, and the server
# needs none of the in-process model packages (ops/agent-server/requirements.txt says why).
# Python 3.12 comes from $PYTHON312, else python3.12 on PATH, else pyenv's newest 3.12.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${AGENT_SERVER_VENV:-.agent-server/venv}"
STAMP="$VENV/.installed"
REQS=ops/agent-server/requirements.txt
if [ ! -f "$STAMP" ] || [ "$REQS" -nt "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
  ok() { [ -n "$1" ] && "$1" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; }
  PY="${PYTHON312:-$(command -v python3.12 || true)}"
  if ! ok "$PY"; then  # a pyenv shim answers even when no 3.12 is selected
    PY="$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12 2>/dev/null | sort -V | tail -1)"
  fi
  if ! ok "$PY"; then
    echo "ops/agent-server/setup.sh: no Python 3.12 found; install it (pyenv install 3.12) or set PYTHON312" >&2
    exit 2
  fi
  test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip >&2
  "$VENV/bin/pip" install --quiet -r "$REQS" >&2
  "$VENV/bin/pip" install --quiet --no-deps -e . >&2
  touch "$STAMP"
fi
echo "$(cd "$VENV" && pwd)/bin/python"
