#!/usr/bin/env bash
# On a machine with a GPU: builds Strata's CUDA backend from downloaded Debian packages, runs the
# CUDA tests and `strata train --device cuda`, then the op benchmark (measured beside the cost
# model) and the training-step benchmark (beside PyTorch eager and torch.compile). Logs and JSON
# results go to RESULTS_DIR. README "Building with CUDA" and BENCHMARKS.md say how it is used.
#   scripts/run_gpu_checks.sh RESULTS_DIR [--no-compile] [--skip-bench]
set -uo pipefail
cd "$(dirname "$0")/.."
results="${1:?run_gpu_checks.sh needs a results directory}"
shift
compile=1
bench=1
for option in "$@"; do
  case "$option" in
    --no-compile) compile=0 ;;
    --skip-bench) bench=0 ;;
    *) echo "run_gpu_checks.sh: unknown option $option" >&2; exit 2 ;;
  esac
done
mkdir -p "$results"
build=build/cuda
stage() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }

stage "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
nvcc --version | tail -1

stage "build"
start=$SECONDS
scripts/build_with_downloaded_packages.sh .debian-packages "$build" strata executor_cuda_test \
  cuda_training_step_bench cuda_ops_bench > "$results/build.log" 2>&1 ||
  { tail -40 "$results/build.log"; exit 1; }
echo "built in $((SECONDS - start)) s"

stage "CUDA tests"
timeout 240 "$build/tests/executor_cuda_test" --gtest_output="json:$results/cuda_tests.json" \
  > "$results/cuda_tests.log" 2>&1
status=$?
grep -E "^\[  (FAILED|PASSED) |worst relative|Failure|error:|Expected|Which is|normalized|^  [a-z_]+ in|tests ran" \
  "$results/cuda_tests.log" | head -100
echo "executor_cuda_test exit $status"

stage "strata train --device cuda"
scratch="$(mktemp -d)"
python3 - <<'EOF' > "$scratch/text.txt"
import itertools
words = "the plan runs on every rank and the simulator predicts the step of the cluster".split()
print(" ".join(words[(i * i + 3 * i) % len(words)] for i in range(200000)))
EOF
"$build/strata" data --text "$scratch/text.txt" --out "$scratch/text.bin" > /dev/null
for precision in fp32 bf16; do
  timeout 120 "$build/strata" train --model gpt-tiny --device cuda --precision "$precision" \
    --data "$scratch/text.bin" --steps 30 --micro-batch 8 --seq-len 256 \
    --checkpoint-dir "$scratch/checkpoints_$precision" 2>&1 | tail -3
done

if [ "$bench" = 1 ]; then
  stage "op benchmark"
  timeout 240 "$build/bench/cuda_ops_bench" --benchmark_out="$results/cuda_ops.json" \
    --benchmark_out_format=json 2>&1 | grep -v "^\*\*\*" | tail -60

  stage "training-step benchmark"
  filter='.'
  [ "$compile" = 1 ] || filter='Strata|compile:0'
  timeout 420 "$build/bench/cuda_training_step_bench" --benchmark_filter="$filter" \
    --benchmark_out="$results/cuda_training_step.json" --benchmark_out_format=json 2>&1 |
    grep -v "^\*\*\*" | tail -20
fi
stage "done"
