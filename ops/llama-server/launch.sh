#!/usr/bin/env bash
# Start the real llama-server, bound to 127.0.0.1 unless --host says otherwise.
#
#   ops/llama-server/launch.sh --slots K [--slot-ctx 32768] [--ngl 99] [--model PATH.gguf] [--port 8083]
#       K specialist slots of slot-ctx tokens each: -c $((slot_ctx*K)) -np K (the reference
#       deployment: --slots 3 --model Athene-V2-Agent.gguf --ngl 99).
#   ops/llama-server/launch.sh [--ctx 8192] [--parallel 2] ...
#       the raw form (the tests' 4,096-token slots: --ctx 8192 --parallel 2).
#   Other options: --host ADDR, --unified (one KV cache shared by all slots, --kv-unified; a
#   slot may then use up to the whole -c, and concurrent requests share the -c tokens:
#   collective's admission control then makes specialists take turns instead of overflowing
#   the pool), --threads N, and `-- ARGS` passed to llama-server. Independent slots (no
#   --unified) run K specialists fully in parallel: name them `llama-server:URL?kv=per-slot`.
#   collective cannot see which you started: llama-server's /props, /slots, /metrics and
#   /v1/models are identical for `-c 8192 -np 4 --kv-unified` and `-c 32768 -np 4` (only its
#   start-up log says kv_unified), so without ?kv=per-slot several slots are read as one pool
#   of one slot's size and the specialists take turns.
#
# llama-server splits -c across the -np slots and caps each slot at the model's training
# context; collective reads the real per-slot value from /props, and `collective smoke` warns
# when it is smaller than the specialist preset. --ngl offloads that many layers to the GPU
# (99 = all; 0 = CPU only, the default). The binary comes from $COLLECTIVE_LLAMA_SERVER, else
# from build.sh (built once and cached); the model defaults to the embedded gemma GGUF.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-$repo/.venv/bin/python}"
[ -x "$python" ] || python=python3

port=8083 ctx="" parallel="" slots="" slot_ctx=32768 model="" host=127.0.0.1 ngl=0
unified=0 threads=""
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port="$2"; shift 2 ;;
    --ctx) ctx="$2"; shift 2 ;;
    --parallel) parallel="$2"; shift 2 ;;
    --slots) slots="$2"; shift 2 ;;
    --slot-ctx) slot_ctx="$2"; shift 2 ;;
    --ngl|--n-gpu-layers) ngl="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --host) host="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --unified) unified=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "launch.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

number() { [[ "$2" =~ ^[0-9]+$ ]] || { echo "launch.sh: $1 must be a whole number, got '$2'" >&2; exit 2; }; }
if [ -n "$slots" ]; then
  number --slots "$slots"; number --slot-ctx "$slot_ctx"
  [ "$slots" -ge 1 ] || { echo "launch.sh: --slots must be at least 1" >&2; exit 2; }
  parallel="${parallel:-$slots}"
  ctx="${ctx:-$((slot_ctx * slots))}"
fi
ctx="${ctx:-8192}" parallel="${parallel:-2}"
number --ctx "$ctx"; number --parallel "$parallel"; number --ngl "$ngl"

binary="${COLLECTIVE_LLAMA_SERVER:-}"
if [ -z "$binary" ]; then
  binary="$(PYTHON="$python" bash "$here/build.sh")"
fi
template=()
if [ -z "$model" ]; then
  model="$(cd "$repo" && "$python" -c 'from collective.models.embedded import embedded_model_path as p; print(p())')"
  # The embedded gemma GGUF ships no chat template; speak Gemma's turns, as collective does in
  # process (llama.cpp's ChatML fallback makes this base model answer with nothing).
  template=(--chat-template-file "$repo/collective/data/templates/gemma.jinja")
fi

args=(-m "$model" --host "$host" --port "$port" -c "$ctx" -np "$parallel" -ngl "$ngl" "${template[@]}")
[ "$unified" = 1 ] && args+=(--kv-unified)
[ -n "$threads" ] && args+=(-t "$threads")
if [ "$host" != 127.0.0.1 ] && [ "$host" != localhost ]; then
  echo "launch.sh: warning: binding $host exposes the server beyond this machine" >&2
fi
echo "llama-server: $model on http://$host:$port (ctx $ctx over $parallel slots = $((ctx / parallel)) each, ngl $ngl)" >&2
exec "$binary" "${args[@]}" "$@"
