#!/usr/bin/env bash
# Create the judge model `gpt-oss-120b-judge` on an Ollama server from the Modelfile beside this
# script, pulling gpt-oss:120b first if the server does not have it (about 65 GB).
#   ops/ollama/create-judge.sh            # uses $OLLAMA_HOST, default 127.0.0.1:11434
# Then check it: `collective smoke --config ops/collective.toml`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
name="${JUDGE_MODEL:-gpt-oss-120b-judge}"
command -v ollama >/dev/null || { echo "create-judge.sh: ollama is not installed (https://ollama.com/download)" >&2; exit 1; }
ollama list | awk '{print $1}' | grep -qx 'gpt-oss:120b' || ollama pull gpt-oss:120b
ollama create "$name" -f "$here/Modelfile.gpt-oss-120b-judge"
# The effective context must read 131072 (the judge budget is built for it).
ollama show "$name" --parameters | grep -E '^num_ctx +131072$' >/dev/null \
  || { echo "create-judge.sh: $name does not report num_ctx 131072" >&2; exit 1; }
echo "created $name (num_ctx 131072) on ${OLLAMA_HOST:-127.0.0.1:11434}"
