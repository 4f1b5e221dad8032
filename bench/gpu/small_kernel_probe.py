#!/usr/bin/env python3
"""Measures the small-kernel regime of eager PyTorch on one GPU, for the simulator's calibration.

Issue 37: on small models a step is bounded by the host issuing kernels and by kernel launch
floors rather than by FLOPs. This probe measures, on the machine it runs on, the numbers those
mechanisms need, each as raw measurements (the fit lives with the cost model, not here):

  dispatch     host time to issue one eager op (forward, and forward + autograd backward), beside
               the device time of the same kernels replayed from a CUDA graph (the device floor)
  elementwise  device time of an elementwise add against the bytes it moves (launch floor and
               bandwidth)
  gemm         device time of bf16 GEMMs over transformer shapes (token count x hidden x tensor
               parallel size), replayed from a CUDA graph so that small GEMMs are not host-bound
  gpt_step     eager training steps of small GPTs (hidden, micro-batch): wall time, the number of
               kernels and their summed device time from one profiled step
  eager_host   host-bound eager steps (small hidden, micro-batch 1-2) at 4, 8 and 16 layers, 30
               steps each: the host's issue time per step (min, median, max), whose slope over
               layers is the host time per layer and whose intercept the rest of the step

Writes one JSON file. `--device cpu` runs every section that does not need CUDA with tiny
counts, to check the script itself on a machine without a GPU.
  small_kernel_probe.py OUT.json [--device cuda|cpu] [--quick]
"""
import argparse
import json
import pathlib
import platform
import statistics
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

# The GPT of the training-step benchmark (nanoGPT's layers), trained eagerly here.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "executor"))
from torch_cuda_training_step import Gpt  # noqa: E402


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def graph_replay_seconds(device, issue, repeats, replays):
    """Device seconds per issue() call: issue() repeated `repeats` times inside one CUDA graph,
    the graph replayed `replays` times between two events. None without CUDA."""
    if device != "cuda":
        return None
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            issue()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeats):
            issue()
    graph.replay()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / 1e3 / (replays * repeats)


def issue_seconds(device, issue, count):
    """Host seconds per issue() call when issued back to back (the loop's own wall time, before
    the final synchronization), and the wall time per call including that synchronization."""
    for _ in range(20):
        issue()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(count):
        issue()
    issued = time.perf_counter()
    synchronize(device)
    done = time.perf_counter()
    return (issued - start) / count, (done - start) / count


def probe_dispatch(device, quick):
    count = 200 if quick else 3000
    results = []
    for width in (1024, 1024 * 1024):
        x = torch.randn(width, device=device)
        y = torch.randn(width, device=device)
        out = torch.empty_like(x)
        matrix = torch.randn(64, 64, device=device)
        vector = torch.randn(64, 64, device=device)
        matrix_out = torch.empty(64, 64, device=device)
        ops = {
            "add_out": lambda: torch.add(x, y, out=out),
            "add_new_tensor": lambda: x + y,
            "mul_scalar": lambda: x * 0.5,
            "gelu_tanh": lambda: F.gelu(x, approximate="tanh"),
            "layer_norm_rows_1024": lambda: F.layer_norm(x.view(-1, 1024), (1024,)),
            "softmax_rows_1024": lambda: torch.softmax(x.view(-1, 1024), dim=-1),
            "matmul_64_out": lambda: torch.matmul(matrix, vector, out=matrix_out),
        }
        for name, issue in ops.items():
            host, wall = issue_seconds(device, issue, count)
            replay = None
            if name.endswith("_out") or name == "mul_scalar":
                try:
                    replay = graph_replay_seconds(device, issue, 50, 20 if quick else 100)
                except Exception as error:  # a graph that cannot capture is reported, not fatal
                    replay = f"graph capture failed: {error}"
            results.append({"op": name, "elements": width, "host_issue_us": host * 1e6,
                            "wall_us": wall * 1e6, "graph_device_us": None if replay is None or
                            isinstance(replay, str) else replay * 1e6, "note": replay
                            if isinstance(replay, str) else None})
    # Forward + backward of a chain of small modules: autograd's per-op cost.
    hidden = 256
    chain = nn.Sequential(*[nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, hidden),
                                          nn.GELU(approximate="tanh")) for _ in range(8)]).to(device)
    inputs = torch.randn(16, hidden, device=device, requires_grad=True)
    forward_ops = 8 * 3

    def forward_backward():
        chain(inputs).sum().backward()

    steps = 20 if quick else 300
    host, wall = issue_seconds(device, forward_backward, steps)
    results.append({"op": "chain_8x(layernorm,linear,gelu)_forward_backward",
                    "modules": forward_ops, "host_issue_us": host * 1e6, "wall_us": wall * 1e6,
                    "host_issue_us_per_module": host * 1e6 / forward_ops})
    return results


def probe_elementwise(device, quick):
    results = []
    exponents = range(10, 20 if quick else 29, 2 if quick else 1)
    for exponent in exponents:
        elements = 1 << exponent
        x = torch.randn(elements, device=device)
        y = torch.randn(elements, device=device)
        out = torch.empty_like(x)
        issue = lambda: torch.add(x, y, out=out)  # noqa: E731
        seconds = graph_replay_seconds(device, issue, 20, 5 if quick else 20)
        if seconds is None:
            seconds = issue_seconds(device, issue, 20)[1]
        results.append({"elements": elements, "bytes": 3 * 4 * elements,
                        "device_us": seconds * 1e6,
                        "gb_per_s": 3 * 4 * elements / seconds / 1e9})
        del x, y, out
    return results


def probe_gemm(device, quick):
    if device != "cuda":
        return []
    dtype = torch.bfloat16
    results = []
    tokens_list = (512, 2048, 8192) if quick else (512, 1024, 2048, 4096, 8192, 16384)
    hiddens = (1024, 2048) if quick else (1024, 1536, 2048, 4096)
    for tokens in tokens_list:
        for hidden in hiddens:
            for tp in (1, 2, 4, 8):
                shapes = {"qkv": (hidden, 3 * hidden // tp), "attention_output": (hidden // tp, hidden),
                          "fc": (hidden, 4 * hidden // tp), "mlp_output": (4 * hidden // tp, hidden)}
                for name, (k, n) in shapes.items():
                    a = torch.randn(tokens, k, device=device, dtype=dtype)
                    b = torch.randn(k, n, device=device, dtype=dtype)
                    c = torch.empty(tokens, n, device=device, dtype=dtype)
                    issue = lambda: torch.matmul(a, b, out=c)  # noqa: E731
                    try:
                        seconds = graph_replay_seconds(device, issue, 10, 5 if quick else 10)
                    except Exception:
                        seconds = issue_seconds(device, issue, 50)[1]
                    flops = 2.0 * tokens * k * n
                    results.append({"gemm": name, "m": tokens, "n": n, "k": k, "hidden": hidden,
                                    "tp": tp, "device_us": seconds * 1e6,
                                    "tflop_per_s": flops / seconds / 1e12})
    return results


def device_kernel_summary(device, step):
    """Kernel count and summed device time of one step, from the profiler."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as profiler:
        step()
        synchronize(device)
    kernels, kernel_us = 0, 0.0
    for event in profiler.events():
        device_type = str(getattr(event, "device_type", ""))
        if device_type.endswith("CUDA"):
            kernels += 1
            kernel_us += event.time_range.elapsed_us()
    return kernels, kernel_us


def probe_gpt_step(device, quick):
    configs = [(256, 4, 1, 256)] if quick else [
        (1024, 16, 1, 1024), (1024, 16, 2, 1024), (1024, 16, 4, 1024), (1024, 16, 8, 1024),
        (2048, 16, 1, 1024), (2048, 16, 4, 1024), (2048, 16, 8, 1024), (512, 8, 1, 1024)]
    layers = 2 if quick else 8
    vocab = 1024 if quick else 50304
    results = []
    for hidden, heads, micro_batch, sequence in configs:
        step = eager_step(device, layers, hidden, heads, micro_batch, sequence, vocab)
        for _ in range(2 if quick else 3):
            step()
        synchronize(device)
        times, issue_times = [], []
        for _ in range(3 if quick else 10):
            start = time.perf_counter()
            step()
            issued = time.perf_counter()
            synchronize(device)
            times.append(time.perf_counter() - start)
            issue_times.append(issued - start)
        kernels, kernel_us = device_kernel_summary(device, step)
        results.append({"hidden": hidden, "heads": heads, "layers": layers, "micro_batch": micro_batch,
                        "sequence": sequence, "vocab": vocab, "step_ms": statistics.median(times) * 1e3,
                        "host_issue_ms": statistics.median(issue_times) * 1e3,
                        "profiled_kernels": kernels, "profiled_kernel_ms": kernel_us / 1e3})
        del step
        if device == "cuda":
            torch.cuda.empty_cache()
    return results


def eager_step(device, layers, hidden, heads, micro_batch, sequence, vocab):
    torch.manual_seed(0)
    model = Gpt(layers, hidden, heads, vocab, sequence).to(device)
    fused = device == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused) if fused else \
        torch.optim.AdamW(model.parameters(), lr=1e-4)
    inputs = torch.randint(0, vocab, (micro_batch, sequence), device=device)
    targets = torch.randint(0, vocab, (micro_batch, sequence), device=device)
    autocast = torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda")

    def step():
        with autocast:
            loss = model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def probe_eager_host(device, quick):
    configs = [(128, 4, 1, 128)] if quick else [
        (256, 4, 1, 1024), (512, 8, 1, 1024), (512, 8, 2, 1024), (1024, 16, 1, 1024)]
    layer_counts = (1, 2) if quick else (4, 8, 16)
    vocab = 1024 if quick else 50304
    steps = 3 if quick else 30
    results = []
    for hidden, heads, micro_batch, sequence in configs:
        for layers in layer_counts:
            step = eager_step(device, layers, hidden, heads, micro_batch, sequence, vocab)
            for _ in range(3):
                step()
            synchronize(device)
            issue, wall = [], []
            for _ in range(steps):
                start = time.perf_counter()
                step()
                issued = time.perf_counter()
                synchronize(device)
                wall.append((time.perf_counter() - start) * 1e3)
                issue.append((issued - start) * 1e3)
            results.append({"hidden": hidden, "heads": heads, "layers": layers,
                            "micro_batch": micro_batch, "sequence": sequence, "vocab": vocab,
                            "host_issue_ms": {"min": min(issue), "median": statistics.median(issue),
                                              "max": max(issue)},
                            "step_ms": {"min": min(wall), "median": statistics.median(wall),
                                        "max": max(wall)}})
            del step
            if device == "cuda":
                torch.cuda.empty_cache()
    # The host's single-thread speed, to compare hosts: a pure-Python loop.
    start = time.perf_counter()
    total = 0
    for value in range(2_000_000):
        total += value
    results.append({"python_loop_2M_ms": (time.perf_counter() - start) * 1e3})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sections", default="dispatch,elementwise,gemm,gpt_step,eager_host")
    arguments = parser.parse_args()
    quick = arguments.quick or arguments.device == "cpu"
    report = {"torch": torch.__version__, "host_cpu": cpu_model(), "device": arguments.device,
              "gpu": torch.cuda.get_device_name() if arguments.device == "cuda" else None,
              "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    sections = {"dispatch": probe_dispatch, "elementwise": probe_elementwise, "gemm": probe_gemm,
                "gpt_step": probe_gpt_step, "eager_host": probe_eager_host}
    for name, probe in sections.items():
        if name not in arguments.sections.split(","):
            continue
        start = time.perf_counter()
        try:
            report[name] = probe(arguments.device, quick)
        except Exception:
            report[name] = {"error": traceback.format_exc()}
        print(f"{name}: {time.perf_counter() - start:.1f} s", flush=True)
        with open(arguments.out, "w") as out:  # written after every section: a timeout keeps the rest
            json.dump(report, out, indent=1)


if __name__ == "__main__":
    main()
