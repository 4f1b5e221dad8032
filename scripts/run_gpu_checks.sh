#!/usr/bin/env bash
# On a machine with a GPU: builds Strata's CUDA backend from downloaded Debian packages (or takes
# the executables of scripts/bundle_cuda_build.sh, built elsewhere: --prebuilt BUNDLE), runs the
# CUDA tests and `strata train --device cuda`, `strata profile --device cuda` with one-GPU plans'
# predictions on its file beside their measured steps, then the op benchmark (measured beside the
# cost model) and the training-step benchmark (beside PyTorch eager and torch.compile), and
# parallel plans under mpirun -np 2 on the one GPU against its one-rank run. Logs and
# JSON results go to RESULTS_DIR. docs/gpus.md "Building with CUDA" and BENCHMARKS.md say how it is used.
#   scripts/run_gpu_checks.sh RESULTS_DIR [--prebuilt BUNDLE] [--no-compile] [--skip-bench]
#                             [--stages tests,train,profile,bench,parallel]   (default: all five)
set -uo pipefail
cd "$(dirname "$0")/.."
results="${1:?run_gpu_checks.sh needs a results directory}"
shift
compile=1
bench=1
bundle=""
stages=tests,train,profile,bench,parallel
while [ $# -gt 0 ]; do
  case "$1" in
    --no-compile) compile=0 ;;
    --skip-bench) bench=0 ;;
    --stages) stages="${2:?--stages needs a list}"; shift ;;
    --prebuilt) bundle="${2:?--prebuilt needs the bundle directory}"; shift ;;
    *) echo "run_gpu_checks.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$results"
wanted() { [[ ",$stages," == *",$1,"* ]]; }
wanted bench || bench=0
build=build/cuda
stage() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }

stage "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
nvcc --version | tail -1

if [ -n "$bundle" ]; then
  stage "prebuilt executables"
  strata_bin="$bundle/bin/strata"
  cuda_test_bin="$bundle/bin/executor_cuda_test"
  ops_bench_bin="$bundle/bin/cuda_ops_bench"
  step_bench_bin="$bundle/bin/cuda_training_step_bench"
  # The bundle's Debian libraries, then the machine's CUDA runtime and cuBLAS.
  export LD_LIBRARY_PATH="$(pwd)/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -d /usr/local/cuda/lib64 ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64"
  # PyTorch's python, started by the step benchmark, keeps the machine's own libraries.
  export STRATA_TORCH_PYTHON="${STRATA_TORCH_PYTHON:-env -u LD_LIBRARY_PATH python3}"
  # Tests and benchmarks find their data through the source path compiled into them.
  source_dir="$(cat "$bundle/source_dir")"
  if [ ! -e "$source_dir" ]; then mkdir -p "$(dirname "$source_dir")" && ln -s "$(pwd)" "$source_dir"; fi
  # NCCL is not in every toolkit folder; PyTorch's python carries it in its nvidia-nccl wheel.
  if ldd "$cuda_test_bin" | grep -q "libnccl.* not found"; then
    nccl_lib=$(env -u LD_LIBRARY_PATH python3 -c \
      "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
    [ -n "$nccl_lib" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_lib" && echo "NCCL from $nccl_lib"
  fi
  echo "glibc here: $(ldd --version | head -1 | grep -o '[0-9.]*$'), bundle needs $(cat "$bundle/needs_glibc")"
  ldd "$strata_bin" "$cuda_test_bin" | grep "not found" && { echo "missing libraries"; exit 1; }
else
  stage "build"
  start=$SECONDS
  scripts/build_with_downloaded_packages.sh .debian-packages "$build" strata executor_cuda_test \
    cuda_training_step_bench cuda_ops_bench > "$results/build.log" 2>&1 ||
    { tail -40 "$results/build.log"; exit 1; }
  echo "built in $((SECONDS - start)) s"
  strata_bin="$build/strata"
  cuda_test_bin="$build/tests/executor_cuda_test"
  ops_bench_bin="$build/bench/cuda_ops_bench"
  step_bench_bin="$build/bench/cuda_training_step_bench"
fi

if wanted tests; then
stage "CUDA tests"
timeout 240 "$cuda_test_bin" --gtest_output="json:$results/cuda_tests.json" \
  > "$results/cuda_tests.log" 2>&1
status=$?
grep -E "^\[  (FAILED|PASSED) |worst relative|Failure|error:|Expected|Which is|normalized|^  [a-z_]+ in|tests ran" \
  "$results/cuda_tests.log" | head -100
echo "executor_cuda_test exit $status"
fi

if wanted train; then
stage "strata train --device cuda"
scratch="$(mktemp -d)"
python3 - <<'EOF' > "$scratch/text.txt"
import itertools
words = "the plan runs on every rank and the simulator predicts the step of the cluster".split()
print(" ".join(words[(i * i + 3 * i) % len(words)] for i in range(200000)))
EOF
"$strata_bin" data --text "$scratch/text.txt" --out "$scratch/text.bin" > /dev/null
for precision in fp32 bf16; do
  timeout 120 "$strata_bin" train --model gpt-tiny --device cuda --precision "$precision" \
    --data "$scratch/text.bin" --steps 30 --micro-batch 8 --seq-len 256 \
    --checkpoint-dir "$scratch/checkpoints_$precision" 2>&1 | tail -3
done
fi

if wanted profile; then
  stage "strata profile --device cuda, and one-GPU plans predicted on it beside their steps"
  PYTHON="${STRATA_TORCH_PYTHON:-python3}" timeout 420 \
    bench/profile/gpu_predicted_vs_measured.sh "$strata_bin" "$results"
fi

if wanted parallel; then
  stage "parallel plans on one GPU under mpirun -np 2 (dp 2, pp 2, tp 2) against one rank"
  timeout 420 scripts/check_gpu_parallel_plans.sh "$strata_bin" "$results"
fi

if [ "$bench" = 1 ]; then
  # Strata's steps and PyTorch's in two processes: a failing CUDA step cannot cost the PyTorch
  # numbers, and each process has the GPU's memory to itself.
  stage "training-step benchmark: Strata"
  timeout 180 "$step_bench_bin" --benchmark_filter='Strata' \
    --benchmark_out="$results/cuda_training_step_strata.json" --benchmark_out_format=json 2>&1 |
    grep -v "^\*\*\*" | tail -8
  torch_step() {  # $1: 0 eager, 1 torch.compile
    stage "training-step benchmark: PyTorch, compile:$1"
    timeout 300 "$step_bench_bin" --benchmark_filter="Torch.*compile:$1" \
      --benchmark_out="$results/cuda_training_step_torch_$1.json" \
      --benchmark_out_format=json 2>&1 | grep -v "^\*\*\*" | tail -4
  }
  torch_step 0

  stage "op benchmark"
  timeout 120 "$ops_bench_bin" --benchmark_out="$results/cuda_ops.json" \
    --benchmark_out_format=json 2>&1 | grep -v "^\*\*\*" | tail -60

  [ "$compile" = 1 ] && torch_step 1  # torch.compile's minutes last
fi
stage "done"
