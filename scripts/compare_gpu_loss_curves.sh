#!/usr/bin/env bash
# Trains one model and variants of it that each change one feature (grouped-query attention,
# norm, MLP activation, position embedding, tied embeddings) for 50 steps on the CPU in float32
# and on the GPU in float32 and bfloat16, with the settings of the CUDA training tests, and prints
# each step's loss and the relative differences. Which feature a GPU/CPU difference follows says
# which op to look at.
#   scripts/compare_gpu_loss_curves.sh STRATA_BINARY RESULTS_DIR [BASE_MODEL] [LEARNING_RATE]
# VARIANTS="base gelu" limits the variants (default: all six).
set -uo pipefail
strata="${1:?compare_gpu_loss_curves.sh needs the strata binary}"
results="${2:?compare_gpu_loss_curves.sh needs a results directory}"
base="${3:-llama-tiny}"
learning_rate="${4:-1e-3}"  # the CUDA training tests' rate
variants="${VARIANTS:-base mha layernorm gelu learned_positions tied}"
cd "$(dirname "$0")/.."
mkdir -p "$results/curves/$base"
scratch="$(mktemp -d)"

# The CUDA training tests' text: five sentences in an order a small generator varies.
python3 - "$scratch/text.txt" <<'EOF'
import sys
sentences = [
    "The planner enumerates every layout of the mesh and keeps the ones that fit. ",
    "Each rank walks its list of actions and sends activations to the next stage. ",
    "A checkpoint records the step, the seed and the parameters of the model. ",
    "Gradients are reduced across the data parallel group before the optimizer step. ",
    "The simulator predicts how long a step takes on the cluster that the plan names. "]
text, state = "", 12345
while len(text) < 60000:
    state = (state * 1664525 + 1013904223) % 2**32
    text += sentences[(state >> 16) % 5]
open(sys.argv[1], "w").write(text)
EOF
"$strata" data --text "$scratch/text.txt" --out "$scratch/text.bin" > /dev/null

python3 - "$base" "$scratch" <<'EOF'
import json, sys
base, scratch = sys.argv[1], sys.argv[2]
model = json.load(open(f"schemas/presets/models/{base}.json"))
model.pop("$schema", None)
variants = {"base": {}, "mha": {"num_kv_heads": model["num_attention_heads"]},
            "layernorm": {"norm": "layernorm"}, "gelu": {"mlp_activation": "gelu"},
            "learned_positions": {"position_embedding": "learned"},
            "tied": {"tied_embeddings": True}}
for name, change in variants.items():
    variant = dict(model, **change, name=f"{base}-{name}")
    if variant.get("position_embedding") == "learned":
        variant.pop("rope_theta", None)
    json.dump(variant, open(f"{scratch}/{name}.json", "w"))
EOF

for variant in $variants; do
  for run in cpu:fp32 cuda:fp32 cuda:bf16; do
    device="${run%%:*}"
    precision="${run##*:}"
    timeout 120 "$strata" train --model "$scratch/$variant.json" --device "$device" \
      --precision "$precision" --data "$scratch/text.bin" --seq-len 64 --micro-batch 4 \
      --global-batch 8 --steps 50 --lr "$learning_rate" --warmup-steps 5 --log-format json \
      > "$results/curves/$base/${variant}_${device}_${precision}.jsonl" 2> "$results/curves/$base/${variant}_${device}_${precision}.err" ||
      { echo "$variant $run failed:"; tail -3 "$results/curves/$base/${variant}_${device}_${precision}.err"; }
  done
done

python3 - "$results/curves/$base" $variants <<'EOF'
import json, pathlib, sys
directory = pathlib.Path(sys.argv[1])
def losses(name):
    path = directory / f"{name}.jsonl"
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    return [r["loss"] for r in records if "loss" in r and "step" in r]
print(f"{'variant':18} {'cpu step1':>10} {'fp32 gpu/cpu-1: step1':>22} {'worst':>9} "
      f"{'bf16 gpu/cpu-1: step1':>22} {'worst':>9} {'at step':>7} {'last':>9}")
for variant in sys.argv[2:]:
    cpu, fp32, bf16 = (losses(f"{variant}_{run}") for run in ("cpu_fp32", "cuda_fp32", "cuda_bf16"))
    if not cpu or not fp32 or not bf16:
        print(f"{variant:18} missing runs ({len(cpu)}, {len(fp32)}, {len(bf16)} steps)")
        continue
    rel = lambda a, b: [abs(x - y) / abs(y) for x, y in zip(a, b)]
    r32, r16 = rel(fp32, cpu), rel(bf16, cpu)
    worst16 = max(range(len(r16)), key=r16.__getitem__)
    print(f"{variant:18} {cpu[0]:10.5f} {r32[0]:22.2e} {max(r32):9.2e} {r16[0]:22.2e} "
          f"{max(r16):9.2e} {worst16 + 1:7d} {r16[-1]:9.2e}")
base = [losses(f"base_{run}") for run in ("cpu_fp32", "cuda_fp32", "cuda_bf16")]
if all(base):
    print("base per step: cpu fp32, gpu fp32, gpu bf16")
    for step, (a, b, c) in enumerate(zip(*base), 1):
        print(f"  {step:3d} {a:.6f} {b:.6f} {c:.6f}")
EOF
