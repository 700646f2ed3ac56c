# Sourced by ops/llama-cpp-python/build-wheel.sh and ops/llama-server/build.sh: llama.cpp is built
# for the CPU it runs on (-march=native: AVX-512 and VNNI where the CPU has them; on this
# project's machines prompts read 1.5-1.7x faster than with the portable AVX2 flags), with AMX
# off (a native build on a host whose CPU reports AMX faulted on its first tile instruction
# under Firecracker). `cpu_key` names the CPU, so a cached build is never reused on another one.
no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
native_cmake_args=(-DGGML_NATIVE=ON "-DCMAKE_C_FLAGS=$no_amx" "-DCMAKE_CXX_FLAGS=$no_amx")
cpu_key="$( { grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; } 2>/dev/null \
  | sha256sum | cut -c1-12)"
