#!/usr/bin/env python3
"""Eager PyTorch steps measured by small_kernel_probe.py beside what `strata simulate` predicts.

For every `gpt_step` row of a probe's JSON (an 8-layer GPT trained eagerly on one GPU), writes the
model as a Strata model file and simulates one step of it on one GPU of CLUSTER as the plain
PyTorch loop it is (`--framework pytorch`: autocast's casts and the unfused element-wise kernels
counted, each kernel issued from Python at the cluster's eager_issue_us_per_kernel) and as Strata's
executor (fused kernels, no host bound). Prints one row per run: measured step, both predictions, their errors, and the share of
the eager prediction spent waiting for the host.
  eager_steps_predicted_vs_measured.py STRATA PROBE.json [--cluster dgx-h100:1x1] [--scratch DIR]
"""
import argparse
import json
import pathlib
import subprocess
import tempfile


def simulate(strata, model_path, cluster, micro_batch, framework):
    output = subprocess.run(
        [strata, "simulate", "--model", str(model_path), "--cluster", cluster,
         "--micro-batch", str(micro_batch), "--global-batch", str(micro_batch),
         "--framework", framework, "--attention", "flash", "--format", "json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(output)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("strata")
    parser.add_argument("probe")
    parser.add_argument("--cluster", default="dgx-h100:1x1")
    parser.add_argument("--scratch")
    arguments = parser.parse_args()
    probe = json.loads(pathlib.Path(arguments.probe).read_text())
    scratch = pathlib.Path(arguments.scratch or tempfile.mkdtemp(prefix="eager-steps-"))
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"{'hidden':>6} {'layers':>6} {'mb':>3} {'measured':>9} {'eager':>9} {'error':>7} "
          f"{'host wait':>9} {'no host':>9} {'error':>7}")
    errors = {"eager": [], "native": []}
    for run in probe["gpt_step"]:
        name = f"probe-gpt-h{run['hidden']}-l{run['layers']}"
        model = {"schema_version": 1, "kind": "model", "name": name, "architecture": "gpt",
                 "num_layers": run["layers"], "hidden_size": run["hidden"],
                 "ffn_hidden_size": 4 * run["hidden"], "num_attention_heads": run["heads"],
                 "num_kv_heads": run["heads"], "vocab_size": run["vocab"],
                 "max_seq_length": run["sequence"], "tied_embeddings": True, "dropout": 0.0}
        model_path = scratch / f"{name}.json"
        model_path.write_text(json.dumps(model))
        eager = simulate(arguments.strata, model_path, arguments.cluster, run["micro_batch"],
                         "pytorch")
        native = simulate(arguments.strata, model_path, arguments.cluster, run["micro_batch"],
                          "strata")
        measured = run["step_ms"] / 1e3
        eager_s = eager["step_time_s"]
        native_s = native["step_time_s"]
        wait = eager["breakdown"]["host_issue_s"] / eager_s
        errors["eager"].append(eager_s / measured - 1)
        errors["native"].append(native_s / measured - 1)
        print(f"{run['hidden']:>6} {run['layers']:>6} {run['micro_batch']:>3} "
              f"{measured * 1e3:>7.2f}ms {eager_s * 1e3:>7.2f}ms {errors['eager'][-1]:>+7.1%} "
              f"{wait:>9.0%} {native_s * 1e3:>7.2f}ms {errors['native'][-1]:>+7.1%}")
    for kind, values in errors.items():
        print(f"{kind}: mean |error| {sum(abs(v) for v in values) / len(values):.1%}, "
              f"worst {max(values, key=abs):+.1%}")


if __name__ == "__main__":
    main()
