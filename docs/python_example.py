"""Strata from Python, as a notebook would use it: size a model, plan it, compare two plans.

Run after the README's build (tests/python runs this file, so it stays true):
    PYTHONPATH=build/default/python /usr/bin/python3 docs/python_example.py
"""
import strata

# What the model is: parameters (and for a mixture of experts, those one token uses) and the
# GPUs its model states need at the least.
described = strata.describe("llama3.1-8b", cluster="dgx-h100:4")
print(f"{described['model']}: {described['parameters']:,} parameters, "
      f"at least {described['cluster']['min_gpus_for_model_states']} GPU(s) for its states")

# The planner's best layouts for a global batch of 128 sequences, fastest first. Each is a plan
# document, the same JSON `strata plan --out` writes and `strata train --plan` runs.
plans = strata.plan(model="llama3.1-8b", cluster="dgx-h100:4", global_batch=128, top=3)
for rank, plan in enumerate(plans, 1):
    mesh = plan["mesh"]
    print(f"plan {rank}: tp {mesh['tp']} · cp {mesh['cp']} · pp {mesh['pp']} · dp {mesh['dp']}, "
          f"ZeRO-{plan['zero_stage']}")

# Predict a step of each: where they differ is what the planner weighed.
for rank, plan in enumerate(plans, 1):
    step = strata.simulate(plan)
    peak = max(stage["peak_bytes"] for stage in step["stages"]) / 2**30
    print(f"plan {rank}: {step['step_time_s']:.3f} s/step, MFU {step['mfu']:.1%}, "
          f"peak memory {peak:.1f} GiB per GPU")

# A mistake is a ValueError carrying the command line's message and the JSON path.
broken = dict(plans[0], mesh=dict(plans[0]["mesh"], tp=3))
try:
    strata.validate(broken)
except strata.InputError as error:
    print(f"refused at {error.json_path}: {error.rule}")
