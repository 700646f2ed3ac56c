#!/usr/bin/env bash
# Build the llama-cpp-python wheel for this machine's CPU (ops/native-cpu.sh: native flags,
# AMX off; or a portable x86-64 level, COLLECTIVE_CPU=x86-64-v3), with llama.cpp's weight
# repacking on. The wheel is cached outside the repo, keyed by version and CPU (or level), and
# reused when present. Prints the wheel's path on stdout; progress
# goes to stderr.
set -euo pipefail
source "$(dirname "$0")/../native-cpu.sh"

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache_root="${COLLECTIVE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/collective}"
dest="$cache_root/wheels/llama-cpp-python-$version-$build_key"

wheel="$(ls "$dest"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -1 || true)"
if [ -n "$wheel" ]; then
  echo "$wheel"
  exit 0
fi

python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "building llama-cpp-python $version for $build_key (about 7 minutes on 2 cores) into $dest" >&2
# scikit-build-core splits CMAKE_ARGS as a shell would: quote each argument.
CMAKE_ARGS="$(printf '%q ' "${cpu_cmake_args[@]}")" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$python" -m pip wheel --quiet \
  --no-deps --no-binary llama-cpp-python --no-cache-dir -w "$work" "llama-cpp-python==$version" >&2

# Install atomically so a half-built wheel is never reused.
mkdir -p "$cache_root/wheels"
staging="$(mktemp -d "$cache_root/wheels/.staging.XXXXXX")"
cp "$work"/llama_cpp_python-*.whl "$staging/"
rm -rf "$dest"
mv "$staging" "$dest"
ls "$dest"/llama_cpp_python-"$version"-*.whl
