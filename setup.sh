#!/usr/bin/env bash
# Installs, from Debian's packages, what Strata needs and the machine lacks; safe to run again.
#   ./setup.sh                 build dependencies (enough to build and run `strata`)
#   ./setup.sh --tests         also what the tests use (python3-jsonschema, python3-torch + OpenBLAS,
#                              python3-pytest, chromium for the report's browser test)
#   ./setup.sh --download DIR  download, without installing, the .deb files that a machine with no
#                              Debian registry needs to build Strata (a GPU machine with nvcc, CMake
#                              and a compiler of its own): README "Building with CUDA"
# The CUDA toolkit (cuBLAS, NCCL) is not a Debian package here: CMake finds it at /usr/local/cuda
# when present and builds without the GPU backend otherwise.
set -euo pipefail

build_packages=(
  cmake ninja-build g++
  nlohmann-json3-dev libeigen3-dev libboost-graph-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  libcli11-dev libfmt-dev librandom123-dev
  pybind11-dev python3-dev
)
# Debian's torch calls the system BLAS: without OpenBLAS it gets netlib's reference BLAS, about
# 25x slower, which would make the PyTorch reference test slow and the benchmark comparison unfair.
# Headless Chromium renders `strata report`'s page in tests/tools/report_browser_test.py.
test_packages=(python3-jsonschema python3-torch python3-numpy libopenblas0-pthread python3-pytest
               chromium)

# What scripts/build_with_downloaded_packages.sh unpacks on such a machine: the headers, CMake
# files and libraries of the build packages (the CPU compiler, CMake and MPI are the machine's own).
download_packages=(
  nlohmann-json3-dev libeigen3-dev libboost1.74-dev
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
  libcli11-dev libfmt-dev libfmt9 librandom123-dev
)

wanted=("${build_packages[@]}")
case "${1:-}" in
  "") ;;
  --tests) wanted+=("${test_packages[@]}") ;;
  --download)
    directory="${2:?setup.sh --download needs a directory}"
    mkdir -p "$directory"
    (cd "$directory" && apt-get download "${download_packages[@]}")
    echo "setup.sh: ${#download_packages[@]} packages in $directory"
    exit 0 ;;
  *) echo "setup.sh: unknown option '$1' (use --tests, --download DIR or nothing)" >&2; exit 2 ;;
esac

missing=()
for package in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup.sh: all ${#wanted[@]} packages present"
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
