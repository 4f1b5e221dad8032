#!/usr/bin/env bash
# The loop strata profile closes: for each model and layout, the simulator's predicted step time
# on a measured cluster file beside the executor's measured median step (steps 2.. of a run; the
# first carries page faults). Usage:
#   bench/profile/predicted_vs_measured.sh STRATA CLUSTER.json TOKENS.bin [STEPS]
# Prints one row per run: model, layout, measured median ms, predicted ms, measured/predicted,
# the largest rank's peak RSS, its growth since before the model was built (the memory the model
# took) and the simulator's predicted peak (MiB), and measured growth / predicted.
set -euo pipefail
strata=$1 cluster=$2 data=$3 steps=${4:-6}
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # model label ranks flags...
  local model=$1 label=$2 ranks=$3; shift 3
  local launcher=()
  [[ $ranks -gt 1 ]] && launcher=(mpirun -np "$ranks" --oversubscribe)
  "${launcher[@]}" "$strata" train --model "$model" --cluster "$cluster" --data "$data" \
    --steps "$steps" --log-format json "$@" |
    /usr/bin/python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
steps = [r for r in rows if "step_time_s" in r and "predicted_step_time_s" in r][1:]
measured = statistics.median(r["step_time_s"] for r in steps)
predicted = steps[-1]["predicted_step_time_s"]
rss = max(r.get("peak_host_bytes", 0) for r in steps) / 2**20
model = max(r.get("peak_model_host_bytes", 0) for r in steps) / 2**20
pred_mem = steps[-1].get("predicted_peak_bytes", 0) / 2**20
print(f"{sys.argv[1]:<12} {sys.argv[2]:<6} {measured*1e3:10.1f} {predicted*1e3:10.1f} "
      f"{measured/predicted:7.3f} {rss:9.0f} {model:9.1f} {pred_mem:9.1f} {model/pred_mem:7.3f}")' \
    "$model" "$label"
}
printf "%-12s %-6s %10s %10s %7s %9s %9s %9s %7s\n" model layout "meas ms" "pred ms" ratio \
  "RSS MiB" "model MiB" "pred MiB" ratio
for model in gpt-tiny llama-tiny gpt2-124m; do
  run "$model" 1 1
  run "$model" dp2 2 --dp 2
  run "$model" tp2 2 --tp 2
  run "$model" pp2 2 --pp 2 --schedule 1f1b --global-batch 16
done
