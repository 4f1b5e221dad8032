#!/usr/bin/env bash
# Packs a CUDA build made on this Debian machine for a GPU machine that has the CUDA runtime and
# cuBLAS but none of Strata's Debian libraries: the named executables (stripped) into BUNDLE/bin,
# and every shared library they load that is not the C runtime, the C++ runtime or CUDA's own into
# BUNDLE/lib. On the GPU machine, `scripts/run_gpu_checks.sh RESULTS --prebuilt BUNDLE` runs them
# with BUNDLE/lib on the library path, so the build costs no GPU time. Build with
# -DSTRATA_NATIVE_CPU=OFF: -march=native code may not run on the GPU machine's processor.
#   scripts/bundle_cuda_build.sh BUILD_DIR BUNDLE [EXECUTABLE...]
# Default executables: strata, tests/executor_cuda_test, bench/cuda_ops_bench,
# bench/cuda_training_step_bench.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:?bundle_cuda_build.sh needs the build directory}"
bundle="${2:?bundle_cuda_build.sh needs the bundle directory}"
shift 2
executables=("$@")
[ ${#executables[@]} -gt 0 ] ||
  executables=(strata tests/executor_cuda_test bench/cuda_ops_bench bench/cuda_training_step_bench)

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
# Libraries every Linux GPU machine has in a compatible or newer version (glibc, libstdc++, the
# GCC runtime) or that must come from its own driver and toolkit (CUDA, cuBLAS, NCCL).
system_library='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libnccl|libnvidia)'
for executable in "${executables[@]}"; do
  path="$build/$executable"
  [ -x "$path" ] || { echo "bundle_cuda_build.sh: $path is not built" >&2; exit 1; }
  strip -o "$bundle/bin/$(basename "$executable")" "$path"
  ldd "$path" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name file; do
    [[ "$name" =~ $system_library ]] && continue
    cp -Lf "$file" "$bundle/lib/$name"
  done
done
# The newest glibc symbol version the executables need: the GPU machine's glibc must be as new.
newest_glibc=$(objdump -T "$bundle"/bin/* "$bundle"/lib/* 2>/dev/null |
  grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
echo "$newest_glibc" > "$bundle/needs_glibc"
# Tests and benchmarks find their data through this path, compiled into them.
pwd > "$bundle/source_dir"
du -sh "$bundle"
echo "bundle_cuda_build.sh: ${#executables[@]} executables, $(ls "$bundle/lib" | wc -l) libraries, needs $newest_glibc"
