#!/usr/bin/env bash
# The loop strata profile closes: for each model and layout, the simulator's predicted step time
# on a measured cluster file beside the executor's measured median step. Usage:
#   bench/profile/predicted_vs_measured.sh STRATA CLUSTER.json TOKENS.bin [STEPS] [ROUNDS]
# MODELS="gpt-tiny llama-tiny" picks the models (default: gpt-tiny llama-tiny gpt2-124m), and
# LAYOUTS="cp2 cp2-gather" the layouts (default: 1 dp2 tp2 pp2; also cp2, cp2-gather — context
# parallelism with ring or all-gather attention — and the 4-rank dp4-zero1, dp4-shard2-zero1 and
# dp4-shard2-zero3: ZeRO over all of dp, and hybrid sharding over pairs of dp ranks).
#
# Each round trains every model × layout once for STEPS steps; the rounds interleave, so a slow
# minute of a shared machine falls on every configuration rather than on one. Measured = the
# median of steps 2.. of all rounds (the first step of a run carries page faults); "rounds" is
# the range of the per-round medians, the noise this machine put on the comparison.
# PROFILE_EACH_ROUND=RANKS re-profiles the machine (`strata profile --quick` on RANKS ranks) before
# every round and predicts that round from its own profile (CLUSTER.json is then not read; give
# -): a shared machine's speed drifts by more than the prediction's error between a profile
# and a run minutes later, so each round's ratio compares a run with the machine it ran on, and
# "ratio" is the median of the per-round ratios (their range beside it).
# Memory: the largest rank's peak RSS, its growth since before the model was built (the memory the
# model took) and the simulator's predicted peak (MiB), and measured growth / predicted.
set -euo pipefail
strata=$1 cluster=$2 data=$3 steps=${4:-6} rounds=${5:-1}
models=${MODELS:-gpt-tiny llama-tiny gpt2-124m}
layouts=${LAYOUTS:-1 dp2 tp2 pp2}
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

run() {  # model label ranks flags...
  local model=$1 label=$2 ranks=$3; shift 3
  local launcher=()
  [[ $ranks -gt 1 ]] && launcher=(mpirun -np "$ranks" --oversubscribe)
  "${launcher[@]}" "$strata" train --model "$model" --cluster "$cluster" --data "$data" \
    --steps "$steps" --log-format json "$@" | grep '^{' >> "$logs/$model.$label.round$round"
}

for round in $(seq "$rounds"); do
  if [[ -n ${PROFILE_EACH_ROUND:-} ]]; then
    cluster=$logs/cluster.round$round.json
    mpirun -np "$PROFILE_EACH_ROUND" --oversubscribe "$strata" profile --quick --out "$cluster" \
      > /dev/null
  fi
  for model in $models; do
    for layout in $layouts; do
      case $layout in
        1) run "$model" 1 1 ;;
        dp2) run "$model" dp2 2 --dp 2 ;;
        tp2) run "$model" tp2 2 --tp 2 ;;
        pp2) run "$model" pp2 2 --pp 2 --schedule 1f1b --global-batch 16 ;;
        cp2) run "$model" cp2 2 --cp 2 ;;
        cp2-gather) run "$model" cp2-gather 2 --cp 2 --cp-comm all_gather ;;
        dp4-zero1) run "$model" dp4-zero1 4 --dp 4 --zero 1 ;;
        dp4-shard2-zero1) run "$model" dp4-shard2-zero1 4 --dp 4 --zero 1 --dp-shard 2 ;;
        dp4-shard2-zero3) run "$model" dp4-shard2-zero3 4 --dp 4 --zero 3 --dp-shard 2 ;;
        *) echo "unknown layout $layout" >&2; exit 2 ;;
      esac
    done
  done
done

LAYOUTS="$layouts" /usr/bin/python3 - "$logs" $models <<'EOF'
import glob, json, os, statistics, sys
logs, models = sys.argv[1], sys.argv[2:]
layouts = os.environ["LAYOUTS"].split()
print(f"{'model':<12} {'layout':<16} {'meas ms':>10} {'rounds ms':>17} {'pred ms':>10} {'ratio':>7} "
      f"{'rounds ratio':>13} "
      f"{'RSS MiB':>9} {'model MiB':>9} {'pred MiB':>9} {'ratio':>7}")
for model in models:
    for label in layouts:
        per_round, rows_all = [], []
        for path in sorted(glob.glob(os.path.join(logs, f"{model}.{label}.round*"))):
            rows = [json.loads(line) for line in open(path)]
            rows = [r for r in rows if "step_time_s" in r and "predicted_step_time_s" in r]
            per_round.append(rows[1:])
            rows_all += rows
        times = [r["step_time_s"] for steps in per_round for r in steps]
        measured = statistics.median(times)
        medians = [statistics.median(r["step_time_s"] for r in steps) for steps in per_round]
        predicted = statistics.median(steps[-1]["predicted_step_time_s"] for steps in per_round)
        # Each round against its own prediction: with PROFILE_EACH_ROUND the rounds ran on
        # different profiles; without it every round has the same prediction.
        ratios = [statistics.median(r["step_time_s"] for r in steps) / steps[-1]["predicted_step_time_s"]
                  for steps in per_round]
        ratio = statistics.median(ratios)
        rss = max(r.get("peak_host_bytes", 0) for r in rows_all) / 2**20
        grown = max(r.get("peak_model_host_bytes", 0) for r in rows_all) / 2**20
        pred_mem = per_round[-1][-1].get("predicted_peak_bytes", 0) / 2**20
        spread = f"{min(medians)*1e3:.0f}-{max(medians)*1e3:.0f}"
        print(f"{model:<12} {label:<16} {measured*1e3:10.1f} {spread:>17} {predicted*1e3:10.1f} "
              f"{ratio:7.3f} {min(ratios):6.3f}-{max(ratios):.3f} {rss:9.0f} {grown:9.1f} {pred_mem:9.1f} "
              f"{grown/pred_mem:7.3f}")
EOF
