#!/usr/bin/env bash
# Build the real llama-server from the llama.cpp sources vendored in the llama-cpp-python sdist.
# Built for this machine's CPU (ops/native-cpu.sh: native flags, AMX off; or a portable x86-64
# level, COLLECTIVE_CPU=x86-64-v3), cached outside the repo keyed by version and CPU (or level),
# and reused when present.
# Prints the path of the binary on stdout; progress goes to stderr.
set -euo pipefail
source "$(dirname "$0")/../native-cpu.sh"

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache_root="${COLLECTIVE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/collective}"
dest="$cache_root/llama-server/$version-$build_key"
binary="$dest/bin/llama-server"

if [ -x "$binary" ]; then
  echo "$binary"
  exit 0
fi

python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "building llama-server $version for $build_key (about 7 minutes on 2 cores) into $dest" >&2
"$python" -m pip download --quiet --no-deps --no-binary llama-cpp-python -d "$work" "llama-cpp-python==$version" >&2
tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
src="$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)"

# No web UI: llama.cpp would otherwise try to download its pre-built assets from Hugging Face
# at build time (LLAMA_USE_PREBUILT_UI, on by default); collective talks to the API only.
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF "${cpu_cmake_args[@]}" >&2
cmake --build "$work/build" --target llama-server -j "$(nproc)" >&2

# Install atomically so a half-built binary is never reused.
mkdir -p "$cache_root/llama-server"
staging="$(mktemp -d "$cache_root/llama-server/.staging.XXXXXX")"
mkdir -p "$staging/bin"
cp "$work/build/bin/llama-server" "$staging/bin/"
rm -rf "$dest"
mv "$staging" "$dest"
echo "$binary"
