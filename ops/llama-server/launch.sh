#!/usr/bin/env bash
# Start the real llama-server on 127.0.0.1 (the embedded gemma model unless --model is given).
#   ops/llama-server/launch.sh [--port 8083] [--ctx 8192] [--parallel 2] [--model PATH.gguf] [-- extra args]
# The per-request context is ctx / parallel, capped at the model's training context; collective
# reads the real value from /props. The binary comes from $COLLECTIVE_LLAMA_SERVER, else from
# build.sh (which builds it once and caches it).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-$repo/.venv/bin/python}"
[ -x "$python" ] || python=python3

port=8083 ctx=8192 parallel=2 model="" host=127.0.0.1
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port="$2"; shift 2 ;;
    --ctx) ctx="$2"; shift 2 ;;
    --parallel) parallel="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --host) host="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "launch.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

binary="${COLLECTIVE_LLAMA_SERVER:-}"
if [ -z "$binary" ]; then
  binary="$(PYTHON="$python" bash "$here/build.sh")"
fi
if [ -z "$model" ]; then
  model="$(cd "$repo" && "$python" -c 'from collective.models.embedded import embedded_model_path as p; print(p())')"
fi

echo "llama-server: $model on http://$host:$port (ctx $ctx over $parallel slots)" >&2
exec "$binary" -m "$model" --host "$host" --port "$port" -c "$ctx" -np "$parallel" "$@"
