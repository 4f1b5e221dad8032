#!/usr/bin/env bash
# The CPU side of docs/gpus.md's "carry the executables" procedure, which runs here without a
# GPU: scripts/bundle_cuda_build.sh packs an executable of this build with the Debian libraries it
# loads, and the bundled executable then runs on those libraries alone (the GPU machine has none
# of Strata's Debian libraries); scripts/run_gpu_checks.sh refuses a bundle that is not one.
#   gpu_bundle_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
source_dir="$(cd "$1" && pwd)"
build_dir="$(cd "$2" && pwd)"
work="$3"
rm -rf "$work"
mkdir -p "$work"
bundle="$(cd "$work" && pwd)/bundle"
fail() { echo "gpu_bundle_test: $*" >&2; exit 1; }

"$source_dir/scripts/bundle_cuda_build.sh" "$build_dir" "$bundle" strata > "$work/bundle.log"
grep -q '^bundle_cuda_build.sh: 1 executables, [0-9]* libraries, needs GLIBC_2\.[0-9]*$' \
  "$work/bundle.log" || fail "unexpected summary: $(tail -1 "$work/bundle.log")"
[ "$(cat "$bundle/source_dir")" = "$source_dir" ] || fail "source_dir is $(cat "$bundle/source_dir")"
grep -qx 'GLIBC_2\.[0-9]*' "$bundle/needs_glibc" || fail "needs_glibc: $(cat "$bundle/needs_glibc")"
# Stripped: no symbol table left (readelf comes with the compiler's binutils).
if readelf -S "$bundle/bin/strata" | grep -q '\.symtab'; then fail "bin/strata is not stripped"; fi

# Strata's own Debian libraries travel with it: fmt and Open MPI at least.
for library in libfmt libmpi; do
  ls "$bundle/lib/$library".so* > /dev/null 2>&1 || fail "$library is not in the bundle"
done
# Nothing the GPU machine brings itself (glibc, libstdc++, CUDA) is copied.
if ls "$bundle/lib" | grep -Eq '^(libc\.|libstdc\+\+|libcudart|libcublas|libnccl)'; then
  fail "the bundle copies a system library: $(ls "$bundle/lib" | tr '\n' ' ')"
fi

# With the bundle's libraries first on the path, every library that is not the system's or CUDA's
# (the GPU machine's toolkit) resolves inside the bundle, and the executable runs.
resolved="$(LD_LIBRARY_PATH="$bundle/lib" ldd "$bundle/bin/strata")"
outside="$(echo "$resolved" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
  grep -Ev "^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda|libcublas|libnccl|libnvidia)" |
  grep -v " $bundle/lib/" || true)"
[ -z "$outside" ] || fail "loaded from outside the bundle: $outside"
LD_LIBRARY_PATH="$bundle/lib" "$bundle/bin/strata" --version > "$work/version.txt"
grep -q '^strata ' "$work/version.txt" || fail "bundled strata --version printed: $(cat "$work/version.txt")"
LD_LIBRARY_PATH="$bundle/lib" "$bundle/bin/strata" describe --model gpt2-124m > "$work/describe.txt"
grep -q 'parameters' "$work/describe.txt" || fail "bundled strata describe printed no parameters"

# A directory that is not a bundle is refused before anything runs.
if "$source_dir/scripts/bundle_cuda_build.sh" "$build_dir" "$work/other" no/such/executable \
    > "$work/refused.log" 2>&1; then
  fail "bundling a missing executable succeeded"
fi
grep -q 'no/such/executable is not built' "$work/refused.log" ||
  fail "missing executable: $(cat "$work/refused.log")"
echo "gpu_bundle_test: bundle of strata with $(ls "$bundle/lib" | wc -l) libraries runs on them alone"
