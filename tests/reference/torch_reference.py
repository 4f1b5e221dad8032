#!/usr/bin/python3
"""Strata's executor against PyTorch, written independently here from the model format.

For each model, export_reference_case writes Strata's initial weights, one batch, the loss and
every gradient, and the losses of 5 AdamW steps. This script rebuilds the same model in PyTorch
(float32, torch.nn.functional), loads the weights, and checks:
  - the loss:                       relative error <= 1e-5
  - every parameter's gradient:     ||g_strata - g_torch|| / ||g_torch|| <= 1e-5
  - 5 AdamW steps (torch.optim.AdamW, clip_grad_norm_, warm-up + cosine): each loss <= 1e-5
Run by CTest (test `torch_reference`); needs Debian's python3-torch and python3-numpy.
"""
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

TOLERANCE = 1e-5


def load_case(directory):
    with open(os.path.join(directory, "case.json")) as file:
        case = json.load(file)
    weights = np.fromfile(os.path.join(directory, "weights.bin"), dtype=np.float32)
    gradients = np.fromfile(os.path.join(directory, "gradients.bin"), dtype=np.float32)
    params, strata_gradients = {}, {}
    for entry in case["parameters"]:
        count = int(np.prod(entry["shape"]))
        begin = entry["offset"]
        shape = entry["shape"]
        params[entry["name"]] = torch.tensor(weights[begin:begin + count].reshape(shape),
                                             requires_grad=True)
        strata_gradients[entry["name"]] = torch.tensor(gradients[begin:begin + count].reshape(shape))
    return case, params, strata_gradients


def norm(x, params, prefix, model):
    weight = params[prefix + ".weight"]
    if model["norm"] == "layernorm":
        return F.layer_norm(x, (x.shape[-1],), weight, params.get(prefix + ".bias"),
                            eps=model["norm_epsilon"])
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + model["norm_epsilon"]) * weight


def rotate_half(x, theta):
    """Rotary embedding on x [batch, seq, heads, dim]: pair (i, i + dim/2) turns by t*theta^(-2i/dim)."""
    seq, dim = x.shape[1], x.shape[3]
    half = dim // 2
    frequencies = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / dim)
    angles = torch.arange(seq, dtype=torch.float64)[:, None] * frequencies[None, :]
    cos = angles.cos().float()[None, :, None, :]
    sin = angles.sin().float()[None, :, None, :]
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)


def model_loss(params, model, inputs, targets):
    batch, seq = inputs.shape
    heads, kv_heads, head_dim = model["num_attention_heads"], model["num_kv_heads"], model["head_dim"]
    x = params["embedding.word"][inputs]
    if model["position_embedding"] == "learned":
        x = x + params["embedding.position"][:seq]
    causal = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    for layer in range(model["num_layers"]):
        p = f"layers.{layer}."
        h = norm(x, params, p + "attention_norm", model)
        qkv = F.linear(h, params[p + "attention.qkv.weight"], params.get(p + "attention.qkv.bias"))
        q, k, v = qkv.split([heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
        q = q.view(batch, seq, heads, head_dim)
        k = k.view(batch, seq, kv_heads, head_dim)
        v = v.view(batch, seq, kv_heads, head_dim)
        if model["position_embedding"] == "rope":
            q, k = rotate_half(q, model["rope_theta"]), rotate_half(k, model["rope_theta"])
        k = k.repeat_interleave(heads // kv_heads, dim=2)
        v = v.repeat_interleave(heads // kv_heads, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(head_dim)
        attention = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v
        attention = attention.transpose(1, 2).reshape(batch, seq, heads * head_dim)
        x = x + F.linear(attention, params[p + "attention.output.weight"],
                         params.get(p + "attention.output.bias"))
        h = norm(x, params, p + "mlp_norm", model)
        if model["mlp_activation"] == "swiglu":
            hidden = F.silu(F.linear(h, params[p + "mlp.gate.weight"], params.get(p + "mlp.gate.bias")))
            hidden = hidden * F.linear(h, params[p + "mlp.up.weight"], params.get(p + "mlp.up.bias"))
        else:
            hidden = F.gelu(F.linear(h, params[p + "mlp.fc.weight"], params.get(p + "mlp.fc.bias")),
                            approximate="tanh")
        x = x + F.linear(hidden, params[p + "mlp.output.weight"], params.get(p + "mlp.output.bias"))
    x = norm(x, params, "final_norm", model)
    head = params["embedding.word"] if model["tied_embeddings"] else params["lm_head.weight"]
    logits = F.linear(x, head)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def learning_rate(step, optimizer):
    """Linear warm-up, then cosine from the peak to the floor (0-based step)."""
    if step < optimizer["warmup_steps"]:
        return optimizer["peak_lr"] * (step + 1) / optimizer["warmup_steps"]
    progress = min(1.0, (step - optimizer["warmup_steps"]) /
                   max(1, optimizer["total_steps"] - optimizer["warmup_steps"]))
    return optimizer["min_lr"] + 0.5 * (optimizer["peak_lr"] - optimizer["min_lr"]) * (
        1 + math.cos(math.pi * progress))


def relative(a, b):
    return float((a - b).norm() / max(b.norm(), 1e-30))


def check_case(directory):
    case, params, strata_gradients = load_case(directory)
    model = case["model"]
    shape = case["batch"]["shape"]
    inputs = torch.tensor(case["batch"]["inputs"], dtype=torch.long).view(shape)
    targets = torch.tensor(case["batch"]["targets"], dtype=torch.long).view(shape)
    failures = []

    loss = model_loss(params, model, inputs, targets)
    loss.backward()
    loss_error = abs(loss.item() - case["loss"]) / abs(loss.item())
    print(f"{model['name']}: loss torch {loss.item():.7f} strata {case['loss']:.7f} "
          f"relative error {loss_error:.2e}")
    if loss_error > TOLERANCE:
        failures.append(f"loss relative error {loss_error:.2e}")
    worst_name, worst = None, 0.0
    for name, parameter in params.items():
        error = relative(strata_gradients[name], parameter.grad)
        if error > worst:
            worst_name, worst = name, error
        if error > TOLERANCE:
            failures.append(f"gradient of {name}: relative error {error:.2e}")
    print(f"{model['name']}: {len(params)} gradients, worst relative error {worst:.2e} ({worst_name})")

    # 5 AdamW steps on the same batch, from the same initial weights.
    optimizer_config = case["optimizer"]
    _, params, _ = load_case(directory)
    decayed = [params[e["name"]] for e in case["parameters"] if e["weight_decay"]]
    others = [params[e["name"]] for e in case["parameters"] if not e["weight_decay"]]
    optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": optimizer_config["weight_decay"]},
         {"params": others, "weight_decay": 0.0}],
        lr=optimizer_config["peak_lr"], betas=(optimizer_config["beta1"], optimizer_config["beta2"]),
        eps=optimizer_config["epsilon"])
    for step, strata_loss in enumerate(case["adamw_losses"]):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, optimizer_config)
        optimizer.zero_grad()
        loss = model_loss(params, model, inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), optimizer_config["max_grad_norm"])
        optimizer.step()
        error = abs(loss.item() - strata_loss) / abs(loss.item())
        print(f"{model['name']}: AdamW step {step + 1}: loss torch {loss.item():.7f} "
              f"strata {strata_loss:.7f} relative error {error:.2e}")
        if error > TOLERANCE:
            failures.append(f"AdamW step {step + 1}: loss relative error {error:.2e}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exporter", required=True, help="export_reference_case binary")
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--models", nargs="+", default=["gpt-tiny", "llama-tiny"])
    arguments = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    failed = False
    for model in arguments.models:
        directory = os.path.join(arguments.work_dir, os.path.basename(model).replace(".json", ""))
        subprocess.run([arguments.exporter, model, directory], check=True)
        failures = check_case(directory)
        for failure in failures:
            print(f"FAIL {model}: {failure}", file=sys.stderr)
        failed = failed or bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
