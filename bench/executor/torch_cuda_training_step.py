#!/usr/bin/env python3
"""One GPT training step (forward, backward, clipping, AdamW) in PyTorch on one GPU.

The model Strata's CUDA backend trains, written the way nanoGPT writes it: learned positions,
pre-LayerNorm blocks with biases, a fused qkv projection, scaled_dot_product_attention (causal,
flash), tanh GELU, tied LM head; bf16 autocast over float32 parameters, fused AdamW, global-norm
clipping. --mode eager runs it as is, --mode compile under torch.compile. Prints one JSON line
with the median step time and the peak memory, for cuda_training_step_bench, which runs Strata's
step on the same shapes in the same job.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # Older PyTorch (bench/gpu/small_kernel_probe.py's dry run on a machine without a GPU): the
    # unfused softmax attention.
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.attention_norm = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.attention_output = nn.Linear(hidden, hidden)
        self.mlp_norm = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.mlp_output = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(self.attention_norm(x)).split(hidden, dim=2)
        shape = (batch, seq, self.heads, hidden // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = causal_attention(q, k, v)
        x = x + self.attention_output(y.transpose(1, 2).reshape(batch, seq, hidden))
        return x + self.mlp_output(F.gelu(self.fc(self.mlp_norm(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, hidden, heads, vocab, max_seq):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.final_norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.word.weight
        for parameter in self.parameters():
            if parameter.dim() > 1:
                nn.init.normal_(parameter, std=0.02)

    def forward(self, inputs, targets):
        positions = torch.arange(inputs.shape[1], device=inputs.device)
        x = self.word(inputs) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.final_norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--vocab", type=int, default=50304)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--mode", choices=["eager", "compile"], default="eager")
    arguments = parser.parse_args()
    torch.manual_seed(0)
    device = "cuda"
    model = Gpt(arguments.layers, arguments.hidden, arguments.heads, arguments.vocab,
                arguments.seq).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=3e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = torch.compile(model) if arguments.mode == "compile" else model
    generator = torch.Generator(device=device).manual_seed(0)
    batches = [torch.randint(0, arguments.vocab, (2, arguments.batch, arguments.seq),
                             device=device, generator=generator) for _ in range(4)]

    def step(index):
        inputs, targets = batches[index % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    compile_start = time.perf_counter()
    for index in range(arguments.warmup):
        step(index)
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - compile_start
    torch.cuda.reset_peak_memory_stats()
    times = []
    for index in range(arguments.steps):
        start = time.perf_counter()
        loss = step(index)
        loss.item()  # waits for the step, as Strata's step waits for its gradient norm
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    tokens = arguments.batch * arguments.seq
    print(json.dumps({"mode": arguments.mode, "median_step_s": median,
                      "tokens_per_s": tokens / median,
                      "peak_memory_bytes": torch.cuda.max_memory_allocated(),
                      "warmup_s": warmup_s, "loss": loss.item(),
                      "torch": torch.__version__,
                      "parameters": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
