#!/usr/bin/env bash
# Builds Strata with the CUDA backend on a machine that has the CUDA toolkit, CMake, ninja and a
# C++ compiler but no Debian package registry (a cloud GPU machine, a lent one): the build
# packages come as .deb files fetched elsewhere by `./setup.sh --download DIR`, and are unpacked
# here with dpkg -x into a prefix that CMake searches first. Nothing is installed system-wide.
#   scripts/build_with_downloaded_packages.sh [DEBS_DIR] [BUILD_DIR] [TARGET...]
# Defaults: .debian-packages, build/cuda, and every target.
set -euo pipefail
cd "$(dirname "$0")/.."
packages="${1:-.debian-packages}"
build="${2:-build/cuda}"
shift $(( $# > 2 ? 2 : $# ))
prefix="$(pwd)/$build/debian-prefix"

ls "$packages"/*.deb >/dev/null 2>&1 || {
  echo "build_with_downloaded_packages.sh: no .deb files in $packages (run ./setup.sh --download $packages on a Debian machine)" >&2
  exit 1
}
mkdir -p "$prefix"
for deb in "$packages"/*.deb; do dpkg -x "$deb" "$prefix"; done

# CMake 4 refuses packages whose config files ask for policies older than 3.5 (Debian 12's do).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON \
  -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_POLICY_VERSION_MINIMUM=3.5
if [ $# -gt 0 ]; then
  cmake --build "$build" --target "$@"
else
  cmake --build "$build"
fi
