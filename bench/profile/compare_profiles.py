#!/usr/bin/env python3
"""Two `strata profile` files of one machine side by side: does each quantity agree within the
noise the two profiles report?

A profile writes each quantity's spread (half the range of its repeats, widened by the drift
between its two compute sweeps) into sources.spread. Two profiles of a machine that held still
should then differ by no more than the sum of their spreads; a quantity outside it means the
profile under-reports its noise (or the machine changed between them). Prints one row per
quantity and a count; the exit status is 0 either way (a measurement, not a test), 2 for bad input.

    compare_profiles.py A.json B.json
"""
import json
import math
import sys


def load(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError) as error:
        sys.exit(f"compare_profiles.py: {path}: {error}")


def spread_of(cluster, key, path):
    spreads = cluster.get("sources", {}).get("spread")
    if spreads is None:
        sys.exit(f"compare_profiles.py: {path}: /sources/spread is missing (not a measured profile)")
    return spreads.get(key)


def relative_rows(cluster, path):
    """(quantity, value, relative spread) of every measured quantity a cluster file carries."""
    gpu = cluster["gpu"]
    rows = [
        ("peak fp32 TFLOP/s", gpu.get("peak_dense_tflops", {}).get("fp32"), "gemm"),
        ("memory-bound kernels GB/s", gpu.get("hbm_bandwidth_gb_per_s"), "memory_bandwidth"),
        ("special functions T/s", gpu.get("special_function_tops"), "special_functions"),
        ("random numbers T/s", gpu.get("random_number_tops"), "random_numbers"),
        ("attention efficiency", gpu.get("attention_efficiency"), "attention"),
        ("kernel launch µs", gpu.get("kernel_launch_us"), "launch"),
    ]
    for index, tier in enumerate(cluster.get("network_tiers", [])):
        key = f"tier_{index}"
        if spread_of(cluster, key, path) is None:
            continue  # a placeholder tier (one-rank profile): not measured
        # Profiles written before the latency had a spread of its own carry the tier's only.
        latency_key = key + "_latency" if spread_of(cluster, key + "_latency", path) is not None else key
        rows.append((f"tier {index} ({tier['name']}) GB/s", tier["bandwidth_gb_per_s"], key))
        rows.append((f"tier {index} ({tier['name']}) latency µs", tier["latency_us"], latency_key))
    return [(name, value, spread_of(cluster, key, path)) for name, value, key in rows
            if value is not None and spread_of(cluster, key, path) is not None]


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: compare_profiles.py A.json B.json")
    a_path, b_path = argv[1], argv[2]
    a, b = load(a_path), load(b_path)
    b_rows = {name: (value, spread) for name, value, spread in relative_rows(b, b_path)}
    print(f"{'quantity':<36} {'A':>18} {'B':>18} {'A/B':>7} {'allowed':>8}  agree")
    agreed = compared = 0
    for name, a_value, a_spread in relative_rows(a, a_path):
        if name not in b_rows:
            continue
        b_value, b_spread = b_rows[name]
        # Relative noise adds for a ratio: A/B may be off 1 by up to A's spread plus B's.
        allowed = a_spread + b_spread
        ratio = a_value / b_value if b_value else math.inf
        agrees = abs(ratio - 1) <= allowed
        compared += 1
        agreed += agrees
        print(f"{name:<36} {a_value:>10.4g} ±{100 * a_spread:>5.1f}% {b_value:>10.4g} "
              f"±{100 * b_spread:>5.1f}% {ratio:>7.3f} {100 * allowed:>7.1f}%  "
              f"{'yes' if agrees else 'NO'}")
    # The communicator's progress is a share (1 − what is left to wait over the all-reduce's own
    # time): its noise is absolute, (1 − share) times the two timings' relative spreads.
    a_share = a.get("communicator_progress_during_compute")
    b_share = b.get("communicator_progress_during_compute")
    if a_share is not None and b_share is not None:
        a_noise = 2 * (1 - a_share) * spread_of(a, "communicator_progress", a_path)
        b_noise = 2 * (1 - b_share) * spread_of(b, "communicator_progress", b_path)
        agrees = abs(a_share - b_share) <= a_noise + b_noise
        compared += 1
        agreed += agrees
        print(f"{'communicator progress (share)':<36} {a_share:>10.3f} ±{a_noise:>6.3f} "
              f"{b_share:>10.3f} ±{b_noise:>6.3f} {'':>7} {a_noise + b_noise:>8.3f}  "
              f"{'yes' if agrees else 'NO'}")
    drift_a = spread_of(a, "compute_drift", a_path)
    drift_b = spread_of(b, "compute_drift", b_path)
    print(f"\n{agreed} of {compared} quantities agree within the two profiles' spreads "
          f"(compute drift inside A {100 * (drift_a or 0):.1f}%, inside B {100 * (drift_b or 0):.1f}%)")


if __name__ == "__main__":
    main(sys.argv)
