#!/usr/bin/python3
"""Strata's per-layer activation memory of a stack under torch.autocast, against what PyTorch's
autograd really keeps.

The `pytorch` framework is a plain training loop over fp32 nn.Module layers under
torch.autocast (nanoGPT). For a GPT-2-shaped layer written here as that loop writes it (LayerNorm,
fused qkv Linear, causal attention written out, output projection, GELU MLP, residual adds),
saved_tensors_hooks record every tensor the forward saves for the backward; parameters are left
out (they are model states), storages counted once. The layer's bytes are the difference between
a 4-layer and a 2-layer stack, halved, so the input, the loss and the head cancel. Strata's are
the same difference of `strata simulate --framework pytorch` stage activations (pp 1, one
micro-batch in flight). They must agree within 1%: what is left is LayerNorm's per-token mean
and rstd, which Strata does not count.

Autocast runs here on the CPU (Debian's torch has no GPU), whose op lists differ from CUDA's in
one op this layer uses: CUDA autocast runs softmax in fp32, the CPU's in bf16. The attention
below casts the scores to fp32 before its softmax, as CUDA autocast would, so what is measured
is what the layer keeps on a GPU. Likewise its dropout calls native_dropout, what F.dropout runs
on a GPU (a mask of bytes), where the CPU's F.dropout multiplies by a noise tensor of the input's
dtype. Run with and without dropout.
Run by CTest (test `autocast_saved_tensors`); needs Debian's python3-torch.
"""
import argparse
import json
import math
import os
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HIDDEN, HEADS, FFN, VOCAB, SEQ, BATCH = 256, 4, 1024, 256, 128, 2
TOLERANCE = 0.01


def dropout(tensor, probability, training):
    return torch.native_dropout(tensor, probability, training)[0] if probability > 0 else tensor


class Layer(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.c_attn = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.c_proj = nn.Linear(HIDDEN, HIDDEN)
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.c_fc = nn.Linear(HIDDEN, FFN)
        self.mlp_proj = nn.Linear(FFN, HIDDEN)
        self.dropout = dropout
        # The positions each query may not see, made once (nanoGPT compares its tril buffer with 0
        # in every forward, a bool tensor of SEQ² bytes a layer that Strata does not count).
        self.register_buffer("hidden", ~torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)))

    def attention(self, x):
        batch, tokens, width = x.shape
        q, k, v = self.c_attn(x).split(width, dim=2)
        heads = lambda t: t.view(batch, tokens, HEADS, width // HEADS).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(width // HEADS))
        scores = scores.masked_fill(self.hidden[:tokens, :tokens], float("-inf"))
        probabilities = torch.softmax(scores.float(), dim=-1)  # CUDA autocast's fp32 softmax
        probabilities = dropout(probabilities, self.dropout, self.training)
        y = (probabilities @ v).transpose(1, 2).contiguous().view(batch, tokens, width)
        return dropout(self.c_proj(y), self.dropout, self.training)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        mlp = self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x + dropout(mlp, self.dropout, self.training)


def saved_bytes(num_layers, dropout):
    torch.manual_seed(0)
    stack = nn.Sequential(*[Layer(dropout) for _ in range(num_layers)]).train()
    excluded = {t.storage().data_ptr() for t in list(stack.parameters()) + list(stack.buffers())}
    kept = {}

    def pack(tensor):
        storage = tensor.storage()
        if storage.data_ptr() not in excluded:
            kept[storage.data_ptr()] = storage.size() * tensor.element_size()
        return tensor

    x = torch.randn(BATCH, SEQ, HIDDEN, requires_grad=True)  # the fp32 residual stream
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            stack(x)
    return sum(kept.values())


def strata_activations(strata, work_dir, num_layers, dropout):
    model = {"schema_version": 1, "kind": "model", "name": f"autocast-{num_layers}",
             "architecture": "gpt", "num_layers": num_layers, "hidden_size": HIDDEN,
             "ffn_hidden_size": FFN, "num_attention_heads": HEADS, "num_kv_heads": HEADS,
             "vocab_size": VOCAB, "max_seq_length": SEQ, "tied_embeddings": True,
             "dropout": dropout, "norm_epsilon": 1e-5}
    path = os.path.join(work_dir, f"model-{num_layers}-{dropout}.json")
    with open(path, "w") as file:
        json.dump(model, file)
    result = subprocess.run(
        [strata, "simulate", "--model", path, "--cluster", "dgx-h100:1x1", "--framework",
         "pytorch", "--precision", "bf16", "--attention", "unfused", "--micro-batch", str(BATCH),
         "--global-batch", str(BATCH), "--seq-len", str(SEQ), "--format", "json"],
        capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"strata simulate failed: {result.stderr.strip()}")
    return json.loads(result.stdout)["stages"][0]["activations_bytes"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--strata", required=True)
    parser.add_argument("--work-dir", required=True)
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    failures = 0
    for dropout in (0.0, 0.1):
        measured = (saved_bytes(4, dropout) - saved_bytes(2, dropout)) / 2
        predicted = (strata_activations(args.strata, args.work_dir, 4, dropout) -
                     strata_activations(args.strata, args.work_dir, 2, dropout)) / 2
        error = predicted / measured - 1
        ok = abs(error) <= TOLERANCE
        failures += not ok
        print(f"dropout {dropout}: PyTorch keeps {measured:,.0f} bytes a layer, Strata predicts "
              f"{predicted:,.0f} ({error:+.2%}) {'ok' if ok else 'FAIL'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
