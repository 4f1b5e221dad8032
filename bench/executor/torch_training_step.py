#!/usr/bin/python3
"""One GPT-2-shaped training step (forward, backward, clipping, AdamW) in PyTorch on the CPU.

The model is torch_reference.py's functional gpt (the same graph Strata runs), with GPT-2 124M
layer shapes. Prints {"median_step_s": ..., "tokens_per_s": ...} for training_step_bench, which
runs it beside Strata's own step so that both are measured on the same machine in the same run.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "reference"))
from torch_reference import model_loss  # noqa: E402


def gpt2_shaped(layers):
    return {"name": "gpt2-124m-shaped", "num_layers": layers, "hidden_size": 768,
            "ffn_hidden_size": 3072, "num_attention_heads": 12, "num_kv_heads": 12, "head_dim": 64,
            "vocab_size": 50257, "max_seq_length": 1024, "tied_embeddings": True,
            "position_embedding": "learned", "norm": "layernorm", "mlp_activation": "gelu",
            "norm_epsilon": 1e-5}


def parameters(model):
    hidden, ffn = model["hidden_size"], model["ffn_hidden_size"]
    shapes = {"embedding.word": (model["vocab_size"], hidden),
              "embedding.position": (model["max_seq_length"], hidden),
              "final_norm.weight": (hidden,), "final_norm.bias": (hidden,)}
    for layer in range(model["num_layers"]):
        p = f"layers.{layer}."
        shapes.update({p + "attention_norm.weight": (hidden,), p + "attention_norm.bias": (hidden,),
                       p + "attention.qkv.weight": (3 * hidden, hidden), p + "attention.qkv.bias": (3 * hidden,),
                       p + "attention.output.weight": (hidden, hidden), p + "attention.output.bias": (hidden,),
                       p + "mlp_norm.weight": (hidden,), p + "mlp_norm.bias": (hidden,),
                       p + "mlp.fc.weight": (ffn, hidden), p + "mlp.fc.bias": (ffn,),
                       p + "mlp.output.weight": (hidden, ffn), p + "mlp.output.bias": (hidden,)})
    return {name: (torch.randn(shape) * 0.02).requires_grad_() for name, shape in shapes.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    arguments = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(arguments.threads)
    model = gpt2_shaped(arguments.layers)
    params = parameters(model)
    optimizer = torch.optim.AdamW(list(params.values()), lr=3e-4, betas=(0.9, 0.95), eps=1e-8,
                                  weight_decay=0.1)
    inputs = torch.randint(0, model["vocab_size"], (arguments.batch, arguments.seq))
    targets = torch.randint(0, model["vocab_size"], (arguments.batch, arguments.seq))
    times = []
    for step in range(arguments.steps + 1):  # the first step warms up
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = model_loss(params, model, inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        optimizer.step()
        if step > 0:
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(json.dumps({"median_step_s": median,
                      "tokens_per_s": arguments.batch * arguments.seq / median,
                      "torch": torch.__version__, "threads": arguments.threads}))


if __name__ == "__main__":
    main()
