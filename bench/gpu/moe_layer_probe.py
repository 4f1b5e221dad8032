#!/usr/bin/env python3
"""Measures a mixture-of-experts block on one GPU the way Megatron-Core runs it, for issue 33.

Why: the simulator predicts Megatron-Bridge's MoE rows 20-30% fast on H100, B200 and GB200 alike,
and dropless routing at micro-batch 1 at half the token-drop rate while at micro-batch 4 the two
are equal (BENCHMARKS.md, "Mixture-of-experts runs"). No single calibration number closes that;
what is missing is inside the MoE block, and only a measurement of its parts separates them: the
device time of the router, the permutation and the experts, the host's time to issue them, and
what dropless routing's device-to-host read of the token counts costs.

The block, as Megatron-Core's alltoall dispatcher and TEGroupedMLP run it (attention and the
all-to-all itself are left out: the collectives and attention have their own probes):
  norm       RMSNorm of the block's input (the layer boundary the host issues across)
  router     a [T x E x h] GEMM in 16 bits, the scores in fp32 (softmax top-k, or sigmoid with
             normalised top-k weights), the switch load-balancing loss
  counts     tokens per local expert; dropless: read on the host (`.tolist()`, a
             device-to-host synchronisation each forward, as the dispatcher's split sizes are);
             token-drop: every expert padded to its capacity, a constant, nothing read
  permute    the routed copies sorted by expert (argsort, gather)
  experts    E/ep local experts: `loop` = one fc1 and one fc2 GEMM per expert with SwiGLU between
             (Transformer Engine's GroupedLinear issues one GEMM per expert); `grouped` = one
             torch._grouped_mm per projection where this PyTorch has it
  unpermute  the expert outputs weighted by their routing probabilities and summed back per token
Expert parallelism is emulated on one GPU: the rank's E/ep local experts receive every routed copy
the rank would get back from a balanced all-to-all (T.k), so each computes T.k.ep/E tokens.
Routing is forced balanced (Megatron-Bridge's benchmarks force it too): the router's scores are
computed and top-k taken, but the dispatch uses a balanced assignment, so dropless and token-drop
runs have the same shapes and differ only in the host read.

For every (model, ep, micro-batch, routing, experts kernel): the wall time of one forward +
backward of LAYERS stacked blocks (median of the steps), the host's issue time (the loop's time
before the final synchronisation), the profiled kernel count and summed kernel time of one step,
and for token-drop the CUDA-graph replay time of the same step (the device floor: no host).
Writes one JSON file after every configuration (a timeout keeps what was measured).

  moe_layer_probe.py OUT.json [--device cuda|cpu] [--quick] [--models qwen3-30b-a3b,...]

`--device cpu` runs tiny shapes in fp32 to check the script without a GPU, and fails on any error
(the `moe_layer_probe_dry_run` test); on a GPU an error is recorded in its run and the next runs on.
"""
import argparse
import json
import statistics
import time
import traceback

import torch
import torch.nn.functional as F

# The device-side helpers of the small-kernel probe beside this file: synchronisation, a CUDA
# graph's replay time, and a profiled step's kernel count and time.
from small_kernel_probe import device_kernel_summary, graph_replay_seconds, synchronize

# name: hidden, routed experts, experts per token, expert FFN width, score function, ep values
# (the ep of each model's Megatron-Bridge rows: the simulator's fixture
# tests/fixtures/validation/moe_runs.jsonl).
MODELS = {
    "qwen3-30b-a3b": (2048, 128, 8, 768, "softmax", (8,)),
    "qwen3-235b-a22b": (4096, 128, 8, 1536, "softmax", (8, 32)),
    "gpt-oss-120b": (2880, 128, 4, 2880, "softmax", (8, 64)),
    "deepseek-v3": (7168, 256, 8, 2048, "sigmoid", (8, 64)),
}
TINY = {"tiny-moe": (64, 16, 2, 32, "softmax", (2,))}


class MoeBlock(torch.nn.Module):
    """One MoE block of one expert-parallel rank (see the module docstring)."""

    def __init__(self, hidden, experts, top_k, width, score, ep, tokens, routing, kernel, device,
                 dtype):
        super().__init__()
        self.experts, self.top_k, self.score, self.routing, self.kernel = (
            experts, top_k, score, routing, kernel)
        self.local = experts // ep
        self.norm_weight = torch.nn.Parameter(torch.ones(hidden, device=device, dtype=dtype))
        self.router = torch.nn.Parameter(0.02 * torch.randn(experts, hidden, device=device,
                                                            dtype=dtype))
        # fc1 holds the gate and up projections of SwiGLU side by side.
        self.fc1 = torch.nn.Parameter(0.02 * torch.randn(self.local, hidden, 2 * width,
                                                         device=device, dtype=dtype))
        self.fc2 = torch.nn.Parameter(0.02 * torch.randn(self.local, width, hidden,
                                                         device=device, dtype=dtype))
        copies = tokens * top_k
        # The balanced dispatch: copy c of the rank goes to local expert c mod E/ep, its token
        # c // k (every token's k copies land on k different experts when k <= E/ep).
        self.register_buffer("local_expert", torch.arange(copies, device=device) % self.local)
        self.register_buffer("copy_token", torch.arange(copies, device=device) // top_k)
        self.capacity = copies // self.local  # each expert's exact share: token-drop pads to it
        # Token-drop's grouped-GEMM offsets are constants, made once (a host-to-device copy
        # inside a CUDA graph's capture would fail).
        self.register_buffer("capacity_offsets", torch.arange(
            1, self.local + 1, device=device, dtype=torch.int32) * self.capacity)

    def forward(self, x):
        tokens = x.shape[0]
        variance = x.float().pow(2).mean(-1, keepdim=True)
        normed = (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype) * self.norm_weight
        logits = (normed @ self.router.t()).float()
        if self.score == "sigmoid":
            scores = torch.sigmoid(logits)
            weights, _ = torch.topk(scores, self.top_k, dim=-1)
            weights = weights / weights.sum(-1, keepdim=True)
        else:
            weights, _ = torch.topk(torch.softmax(logits, dim=-1), self.top_k, dim=-1)
        # Switch load-balancing loss over the balanced assignment: E * sum(f_i * P_i).
        probabilities = torch.softmax(logits, dim=-1).mean(0)
        fraction = torch.full_like(probabilities, 1.0 / self.experts)
        aux_loss = self.experts * (fraction * probabilities).sum()

        # Tokens per local expert (an index_add: bincount and one_hot read their maximum on the
        # host, which would put a synchronisation into the token-drop path too).
        counts = torch.zeros(self.local, device=x.device, dtype=torch.int64).index_add_(
            0, self.local_expert, torch.ones_like(self.local_expert))
        if self.routing == "dropless":
            splits = counts.tolist()  # the dispatcher's split sizes, read on the host
            offsets = None
        else:
            splits = [self.capacity] * self.local
            offsets = self.capacity_offsets
        order = torch.argsort(self.local_expert, stable=True) if hasattr(torch, "argsort") else \
            torch.sort(self.local_expert)[1]
        token_of_copy = self.copy_token[order]
        permuted = normed.index_select(0, token_of_copy)
        probability_of_copy = weights.reshape(-1)[order].to(x.dtype)

        if self.kernel == "grouped":
            if offsets is None:
                offsets = torch.cumsum(counts, 0).to(torch.int32)
            gate_up = torch._grouped_mm(permuted, self.fc1, offs=offsets)
            gate, up = gate_up.chunk(2, dim=-1)
            out = torch._grouped_mm(F.silu(gate) * up, self.fc2, offs=offsets)
        else:
            outputs = []
            for expert, chunk in enumerate(permuted.split(splits)):
                gate, up = (chunk @ self.fc1[expert]).chunk(2, dim=-1)
                outputs.append((F.silu(gate) * up) @ self.fc2[expert])
            out = torch.cat(outputs)
        combined = torch.zeros_like(x).index_add_(0, token_of_copy,
                                                  out * probability_of_copy.unsqueeze(-1))
        return x + combined, aux_loss


def make_step(blocks, tokens, hidden, device, dtype):
    x = torch.randn(tokens, hidden, device=device, dtype=dtype, requires_grad=True)

    def step():
        y, aux = x, 0.0
        for block in blocks:
            y, loss = block(y)
            aux = aux + loss
        (y.float().pow(2).mean() + 0.01 * aux).backward()
    return step


def measure(device, dtype, name, shape, ep, micro_batch, sequence, routing, kernel, layers, steps):
    hidden, experts, top_k, width, score, _ = shape
    tokens = micro_batch * sequence
    torch.manual_seed(0)
    blocks = [MoeBlock(hidden, experts, top_k, width, score, ep, tokens, routing, kernel, device,
                       dtype) for _ in range(layers)]
    step = make_step(blocks, tokens, hidden, device, dtype)
    for _ in range(3):
        step()
    synchronize(device)
    wall, issue = [], []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        issued = time.perf_counter()
        synchronize(device)
        wall.append(time.perf_counter() - start)
        issue.append(issued - start)
    kernels, kernel_us = device_kernel_summary(device, step)
    graph_s = None
    if device == "cuda" and routing == "token-drop":
        try:  # one step per graph, replayed `steps` times
            graph_s = graph_replay_seconds(device, step, 1, steps)
        except Exception:  # a step that cannot be captured keeps no floor
            graph_s = None
    record = {"model": name, "hidden": hidden, "experts": experts, "top_k": top_k,
              "expert_width": width, "ep": ep, "local_experts": experts // ep,
              "micro_batch": micro_batch, "sequence": sequence, "tokens": tokens,
              "tokens_per_local_expert": tokens * top_k // (experts // ep), "routing": routing,
              "experts_kernel": kernel, "layers": layers,
              "step_ms": statistics.median(wall) * 1e3,
              "host_issue_ms": statistics.median(issue) * 1e3,
              "profiled_kernels": kernels, "profiled_kernel_ms": kernel_us / 1e3,
              "graph_replay_ms": None if graph_s is None else graph_s * 1e3}
    del blocks, step
    if device == "cuda":
        torch.cuda.empty_cache()
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--quick", action="store_true", help="micro-batch 1 and 4 only, 5 steps")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--layers", type=int, default=4)
    arguments = parser.parse_args()
    cpu = arguments.device == "cpu"
    models = TINY if cpu else {name: MODELS[name] for name in arguments.models.split(",")}
    dtype = torch.float32 if cpu else torch.bfloat16
    sequence = 64 if cpu else 4096
    micro_batches = (1, 2) if cpu else ((1, 4) if arguments.quick else (1, 2, 4))
    steps = 2 if cpu else (5 if arguments.quick else 10)
    kernels = ["loop"] + (["grouped"] if hasattr(torch, "_grouped_mm") and not cpu else [])
    report = {"torch": torch.__version__, "device": arguments.device,
              "gpu": torch.cuda.get_device_name() if not cpu else None,
              "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "runs": []}
    for name, shape in models.items():
        for ep in shape[5]:
            for micro_batch in micro_batches:
                for routing in ("dropless", "token-drop"):
                    for kernel in kernels:
                        start = time.perf_counter()
                        try:
                            record = measure(arguments.device, dtype, name, shape, ep,
                                             micro_batch, sequence, routing, kernel,
                                             1 if cpu else arguments.layers, steps)
                        except Exception:
                            if cpu:
                                raise
                            record = {"model": name, "ep": ep, "micro_batch": micro_batch,
                                      "routing": routing, "experts_kernel": kernel,
                                      "error": traceback.format_exc()}
                            if not cpu:
                                torch.cuda.empty_cache()
                        report["runs"].append(record)
                        print(f"{name} ep{ep} mb{micro_batch} {routing} {kernel}: "
                              f"{record.get('step_ms', float('nan')):.2f} ms "
                              f"({time.perf_counter() - start:.1f} s)", flush=True)
                        with open(arguments.out, "w") as out:
                            json.dump(report, out, indent=1)
    if cpu:  # the dry run: every variant ran and was timed
        routings = {run["routing"] for run in report["runs"] if run["step_ms"] > 0}
        if routings != {"dropless", "token-drop"}:
            raise SystemExit(f"dry run timed only {sorted(routings)}")


if __name__ == "__main__":
    main()
