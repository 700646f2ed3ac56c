# Sourced by ops/llama-cpp-python/build-wheel.sh and ops/llama-server/build.sh: the CPU llama.cpp
# is built for, chosen by COLLECTIVE_CPU (docs/portable-build.md).
#
# - native (the default): built for the CPU it runs on (-march=native: AVX-512 and VNNI where
#   the CPU has them; on this project's machines prompts read 1.5-1.7x faster than with the
#   portable AVX2 flags), with AMX off (a native build on a host whose CPU reports AMX faulted
#   on its first tile instruction under Firecracker). The build key names the CPU, so a cached
#   build is never reused on another one.
# - x86-64-v3 or x86-64-v2: a portable build for any x86-64 CPU of that level (GGML_NATIVE off,
#   each vector extension named): v3 is AVX2, FMA, F16C and BMI2, llama.cpp's own portable
#   default; v2 stops at SSE4.2, where the K-quant dot products fall back to scalar code. The
#   build key names the level, so the build is reused on any CPU and never taken for a native
#   one. `make portable-test` runs the real-model tests on such a build.
#
# Sets `cpu_cmake_args` (the cmake arguments) and `build_key` (the cache directory's suffix).
no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
case "${COLLECTIVE_CPU:-native}" in
  native)
    cpu_cmake_args=(-DGGML_NATIVE=ON "-DCMAKE_C_FLAGS=$no_amx" "-DCMAKE_CXX_FLAGS=$no_amx")
    cpu_key="$( { grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; } \
      2>/dev/null | sha256sum | cut -c1-12)"
    build_key="native-$cpu_key"
    ;;
  x86-64-v3 | x86-64-v2)
    level="$COLLECTIVE_CPU"
    if [ "$level" = x86-64-v3 ]; then v3=ON; else v3=OFF; fi
    cpu_cmake_args=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON "-DGGML_AVX=$v3" "-DGGML_AVX2=$v3"
      "-DGGML_FMA=$v3" "-DGGML_F16C=$v3" "-DGGML_BMI2=$v3" -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF
      -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF
      -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF "-DCMAKE_C_FLAGS=-march=$level"
      "-DCMAKE_CXX_FLAGS=-march=$level")
    build_key="portable-$level"
    ;;
  *)
    echo "COLLECTIVE_CPU=$COLLECTIVE_CPU: expected native, x86-64-v3 or x86-64-v2" >&2
    exit 2
    ;;
esac
