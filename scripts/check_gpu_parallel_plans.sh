#!/usr/bin/env bash
# Parallel plans on one GPU (issue 36, part 4): `strata train --device cuda` under `mpirun -np 2`,
# both ranks on the one GPU and their collectives staged through host memory by the MPI
# communicator, against the one-rank CUDA run of the same model, data, seed and global batch:
# dp 2, pp 2 (1F1B), tp 2, and tp 2 with sequence parallelism (gpt-tiny: vocabulary-parallel
# embedding and loss, row-parallel biases, a rank's positions starting mid-sequence; llama-tiny:
# GQA's kv heads, RMSNorm, rotary), and one rank whose groups run over NCCL, each in fp32 (every step's loss within 1e-4 relative of the
# one-rank run's) and bf16 (within 2e-2). Context parallelism is refused on CUDA. Prints one
# row per layout and writes RESULTS_DIR/gpu-parallel-plans.json; exits 1 when a layout fails or
# misses its bound.
#   scripts/check_gpu_parallel_plans.sh STRATA RESULTS_DIR
# MPIRUN (default `mpirun`) and PYTHON (default python3, the standard library is enough) may be set.
set -uo pipefail
strata=$(realpath "${1:?check_gpu_parallel_plans.sh needs the strata executable}")
results=${2:?check_gpu_parallel_plans.sh needs a results directory}
mpirun=${MPIRUN:-mpirun}
python=${PYTHON:-python3}
mkdir -p "$results"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

$python -c "
words = 'the plan runs on every rank and the simulator predicts the step of the cluster'.split()
print(' '.join(words[(i * i + 3 * i) % len(words)] for i in range(100000)))" > "$scratch/text.txt"
"$strata" data --text "$scratch/text.txt" --out "$scratch/text.bin" > /dev/null || exit 1

# Two micro-batches of 4 a step: the one-rank run accumulates them, dp 2 reduces them.
common=(train --device cuda --data "$scratch/text.bin" --steps 20 --seq-len 64
        --micro-batch 4 --global-batch 8 --lr 1e-3 --warmup-steps 5 --log-format json)
run() {  # $1: label, $2: model, $3: ranks, then layout flags
  local label=$1 model=$2 ranks=$3
  shift 3
  local launcher=()
  [ "$ranks" -gt 1 ] && launcher=("$mpirun" --oversubscribe -np "$ranks" -x LD_LIBRARY_PATH)
  timeout 180 "${launcher[@]}" "$strata" "${common[@]}" --model "$model" "$@" > "$scratch/$label.log" \
    2> "$scratch/$label.err" || { echo "$label failed:"; grep -m3 "strata:\|rror" "$scratch/$label.err"; }
}
for precision in fp32 bf16; do
  run "one_$precision" gpt-tiny 1 --precision "$precision"
  run "dp2_$precision" gpt-tiny 2 --precision "$precision" --dp 2
  run "pp2_$precision" gpt-tiny 2 --precision "$precision" --pp 2 --schedule 1f1b
  run "tp2_$precision" gpt-tiny 2 --precision "$precision" --tp 2
  run "tp2sp_$precision" gpt-tiny 2 --precision "$precision" --tp 2 --sequence-parallel
  run "llama_one_$precision" llama-tiny 1 --precision "$precision"
  run "llama_tp2sp_$precision" llama-tiny 2 --precision "$precision" --tp 2 --sequence-parallel
  # The trainer's groups over NCCL (device tensors) beside the one-rank backend: a job of one,
  # since NCCL refuses two ranks on one GPU.
  run "nccl1_$precision" gpt-tiny 1 --precision "$precision" --collectives nccl
done
# Two ranks on the one GPU: auto stages through MPI (the runs above); nccl is refused, saying why.
"$mpirun" --oversubscribe -np 2 -x LD_LIBRARY_PATH "$strata" "${common[@]}" --model gpt-tiny \
  --dp 2 --collectives nccl > /dev/null 2> "$scratch/shared.err"
if grep -q "share a GPU" "$scratch/shared.err"; then
  echo "mpirun -np 2 --collectives nccl on one GPU: refused ($(grep -m1 -o 'nccl: ranks.*' "$scratch/shared.err"))"
else
  echo "mpirun -np 2 --collectives nccl on one GPU: NOT refused as expected:"; head -3 "$scratch/shared.err"
fi

$python - "$scratch" "$results" <<'PY'
import json, sys
scratch, results = sys.argv[1], sys.argv[2]
def losses(label):
    try:
        lines = [json.loads(l) for l in open(f"{scratch}/{label}.log") if l.startswith("{")]
    except OSError:
        return []
    return [l["loss"] for l in lines if "loss" in l and "step" in l]
rows, failed = [], False
print(f"{'layout':<12} {'precision':<9} {'steps':>5} {'worst relative':>15} {'bound':>7}  first → last")
for precision, bound in (("fp32", 1e-4), ("bf16", 2e-2)):
    for layout, one_rank in (("dp2", "one"), ("pp2", "one"), ("tp2", "one"), ("tp2sp", "one"),
                             ("llama_tp2sp", "llama_one"), ("nccl1", "one")):
        reference = losses(f"{one_rank}_{precision}")
        got = losses(f"{layout}_{precision}")
        ok = len(got) == len(reference) == 20
        worst = max((abs(a - b) / abs(b) for a, b in zip(got, reference)), default=float("inf"))
        ok = ok and worst <= bound
        failed = failed or not ok
        rows.append({"layout": layout, "precision": precision, "steps": len(got),
                     "worst_relative": worst, "bound": bound, "passed": ok,
                     "losses": got, "one_rank_losses": reference})
        span = f"{reference[0]:.4f} → {reference[-1]:.4f}" if reference else "-"
        print(f"{layout:<12} {precision:<9} {len(got):>5} {worst:>15.3g} {bound:>7.0e}  {span}"
              f"{'' if ok else '  FAILED'}")
json.dump(rows, open(f"{results}/gpu-parallel-plans.json", "w"), indent=1)
sys.exit(1 if failed else 0)
PY
