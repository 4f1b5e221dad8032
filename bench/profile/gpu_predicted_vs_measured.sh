#!/usr/bin/env bash
# The loop `strata profile --device cuda` closes on a GPU: profile the GPU into a cluster file,
# then train one-GPU plans on it and set each measured step beside the simulator's prediction on
# that file (and on a datasheet preset, for contrast). Usage:
#   bench/profile/gpu_predicted_vs_measured.sh STRATA RESULTS_DIR [PRESET]
# Writes RESULTS_DIR/gpu-profile.json (the cluster file), gpu-profile.log (its report) and
# gpu-predicted-vs-measured.json (one row per model and cluster); prints the table.
# Models: GPT-2 124M (the preset: dropout 0.1, vocabulary 50,257, whose LM-head GEMMs are off the
# tensor cores' 16-byte grid), the same with the vocabulary padded to 50,304 (as llm.c and nanoGPT
# train it), and a 1.3B GPT (24 layers, hidden 2048, 16 heads of 128, vocabulary 50,304, no
# dropout), 16 × 1,024 tokens a step in bf16. Measured = the
# median step of steps 3.. (the first carry the allocator's and cuBLAS's warm-up).
set -euo pipefail
strata=$1 results=$2 preset=${3:-dgx-h200}
steps=${STEPS:-10}
python=${PYTHON:-python3}  # a python3 with the standard library (no packages needed)
mkdir -p "$results"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

start=$SECONDS
timeout "${PROFILE_TIMEOUT:-300}" "$strata" profile --device cuda --out "$results/gpu-profile.json" \
  --name measured-gpu > "$results/gpu-profile.log" 2>&1 || { cat "$results/gpu-profile.log"; exit 1; }
echo "profiled in $((SECONDS - start)) s"
cat "$results/gpu-profile.log"

$python - "$scratch" <<'PY'
import json, sys
scratch = sys.argv[1]
words = "the plan runs on every rank and the simulator predicts the step of the cluster".split()
open(f"{scratch}/text.txt", "w").write(
    " ".join(words[(i * i + 3 * i) % len(words)] for i in range(400000)))
model = {"schema_version": 1, "kind": "model", "name": "gpt-1.3b", "architecture": "gpt",
         "num_layers": 24, "hidden_size": 2048, "ffn_hidden_size": 8192,
         "num_attention_heads": 16, "num_kv_heads": 16, "vocab_size": 50304,
         "max_seq_length": 1024, "tied_embeddings": True, "dropout": 0.0, "norm_epsilon": 1e-5}
json.dump(model, open(f"{scratch}/gpt-1.3b.json", "w"))
padded = {"schema_version": 1, "kind": "model", "name": "gpt2-124m-padded", "architecture": "gpt",
          "num_layers": 12, "hidden_size": 768, "ffn_hidden_size": 3072,
          "num_attention_heads": 12, "num_kv_heads": 12, "vocab_size": 50304,
          "max_seq_length": 1024, "tied_embeddings": True, "dropout": 0.1, "norm_epsilon": 1e-5}
json.dump(padded, open(f"{scratch}/gpt2-124m-padded.json", "w"))
PY
"$strata" data --text "$scratch/text.txt" --out "$scratch/text.bin" > /dev/null

for model in gpt2-124m "$scratch/gpt2-124m-padded.json" "$scratch/gpt-1.3b.json"; do
  for cluster in "$results/gpu-profile.json" "$preset"; do
    label=$(basename "$model" .json)_$(basename "$cluster" .json)
    echo "$(date +%T) train $label"
    timeout "${TRAIN_TIMEOUT:-300}" "$strata" train --model "$model" --device cuda --precision bf16 \
      --cluster "$cluster" --data "$scratch/text.bin" --steps "$steps" --micro-batch 16 \
      --seq-len 1024 --log-format json > "$scratch/$label.log" 2> "$scratch/$label.err" ||
      { echo "train $label failed:"; tail -5 "$scratch/$label.err"; }
  done
done

$python - "$scratch" "$results" <<'PY'
import glob, json, os, statistics, sys
scratch, results = sys.argv[1], sys.argv[2]
rows = []
print(f"{'model':<12} {'cluster':<14} {'measured ms':>12} {'predicted ms':>13} {'measured/pred':>14}")
for log in sorted(glob.glob(f"{scratch}/*.log")):
    lines = [json.loads(l) for l in open(log) if l.startswith("{") and '"step"' in l]
    steps = [l for l in lines if "step_time_s" in l][2:]
    if not steps:
        continue
    model, cluster = os.path.basename(log)[:-4].rsplit("_", 1)
    measured = statistics.median(l["step_time_s"] for l in steps)
    predicted = steps[-1]["predicted_step_time_s"]
    rows.append({"model": model, "cluster": cluster, "measured_s": measured,
                 "predicted_s": predicted, "ratio": measured / predicted,
                 "peak_device_bytes": max(l["peak_device_bytes"] for l in steps),
                 "predicted_peak_bytes": steps[-1]["predicted_peak_bytes"]})
    print(f"{model:<12} {cluster:<14} {1e3 * measured:>12.1f} {1e3 * predicted:>13.1f} "
          f"{measured / predicted:>14.3f}")
json.dump(rows, open(f"{results}/gpu-predicted-vs-measured.json", "w"), indent=1)
PY
