#!/usr/bin/python3
"""Strata's executor against PyTorch, written independently here from the model format.

For each model, export_reference_case writes Strata's initial weights, one batch, the loss and
every gradient, and the losses of a few AdamW steps. This script rebuilds the same model in PyTorch
(float32, torch.nn.functional; mixture-of-experts layers with every router, latent attention,
ALiBi, query/key and embedding norms, squared-ReLU MLPs and multi-token prediction included), loads the weights, and
checks:
  - the loss:                       relative error <= 1e-5
  - every parameter's gradient:     ||g_strata - g_torch|| / ||g_torch|| <= 1e-5
  - the AdamW steps (torch.optim.AdamW, clip_grad_norm_, warm-up + cosine): each loss <= 1e-5
The loss compared is the language-model cross-entropy; the gradients and the AdamW updates are of
the training objective, which adds the MoE layers' load-balancing and z-losses and the weighted
multi-token-prediction loss to it.
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


def alibi_slopes(heads):
    """ALiBi's head slopes (Press et al. 2022, and BLOOM's code): a geometric sequence starting at
    2^(-8/n) for a power of two n; otherwise the closest power of two's, then every other slope of
    twice that many heads."""
    if heads & (heads - 1) == 0:
        return [2.0 ** (-8.0 * (i + 1) / heads) for i in range(heads)]
    power = 2 ** math.floor(math.log2(heads))
    return alibi_slopes(power) + alibi_slopes(2 * power)[0::2][:heads - power]


def alibi_bias(heads, seq):
    """[heads, seq, seq]: -slope_h * (i - j), the distance penalty of query i for key j."""
    slopes = torch.tensor(alibi_slopes(heads), dtype=torch.float64)
    positions = torch.arange(seq, dtype=torch.float64)
    distance = positions[:, None] - positions[None, :]
    return (-slopes[:, None, None] * distance[None]).float()


def activation(x, kind):
    if kind == "squared_relu":
        return F.relu(x).square()
    return F.gelu(x, approximate="tanh")


def mlp(x, params, prefix, model, expert=None):
    """The model's MLP kind (swiglu, or gelu with the tanh approximation) on x, with the weights
    under prefix: the dense MLP, the fused shared experts, or, with `expert`, that routed expert's
    slice of the stacked expert weights."""
    def linear(inputs, name):
        weight, bias = params[prefix + name + ".weight"], params.get(prefix + name + ".bias")
        if expert is not None:
            weight, bias = weight[expert], None if bias is None else bias[expert]
        if bias is not None and bias.dim() == 2:
            bias = bias.sum(0)  # fused shared experts keep one output bias each, [S, H]; all add
        return F.linear(inputs, weight, bias)

    if model["mlp_activation"] == "swiglu":
        hidden = F.silu(linear(x, "gate")) * linear(x, "up")
    elif model["mlp_activation"] == "clamped_swiglu":
        # GPT-OSS (transformers' GptOssExperts): both inputs clamped, a sloped sigmoid, up + 1.
        limit, alpha = model["swiglu_limit"], model["swiglu_alpha"]
        gate = linear(x, "gate").clamp(max=limit)
        up = linear(x, "up").clamp(min=-limit, max=limit)
        hidden = (up + 1) * gate * torch.sigmoid(alpha * gate)
    else:
        hidden = activation(linear(x, "fc"), model["mlp_activation"])
    return linear(hidden, "output")


def is_moe_layer(layer, model):
    """MoE layers start after first_dense_layers and then come every moe_layer_interval layers."""
    moe = model.get("moe")
    if not moe or layer < moe["first_dense_layers"]:
        return False
    return (layer - moe["first_dense_layers"] + 1) % moe["moe_layer_interval"] == 0


def choose(keys, router, top_k):
    """[T, K] chosen experts by decreasing key: with group-limited routing (DeepSeek-V3,
    Megatron-Core's group_limited_topk) among the experts of each token's best groups, a group's
    key being the sum of its best top_k // groups_per_token keys. Ties go to the lower index, as
    a stable sort on the negated keys gives them."""
    tokens, num_experts = keys.shape
    groups = router["expert_groups"]
    if groups > 1:
        per_group = keys.view(tokens, groups, num_experts // groups)
        counted = max(1, top_k // router["groups_per_token"])
        group_keys = per_group.sort(dim=-1, descending=True, stable=True)[0][..., :counted].sum(-1)
        best = group_keys.sort(dim=-1, descending=True, stable=True)[1][:, :router["groups_per_token"]]
        allowed = torch.zeros(tokens, groups, dtype=torch.bool).scatter(1, best, True)
        allowed = allowed[:, :, None].expand_as(per_group).reshape(tokens, num_experts)
        keys = keys.masked_fill(~allowed, float("-inf"))
    return keys.sort(dim=-1, descending=True, stable=True)[1][:, :top_k]


def route(tokens, params, prefix, moe, loads=None):
    """Top-K experts per token [T, K] (by decreasing choice key: the score, plus the expert bias
    where the router has one, which steers the choice only), their combine weights [T, K] (the
    gradient reaches the router through these, not through the selection), and this layer's
    load-balancing + z-loss. Adds each expert's choices to loads[prefix] when given."""
    router = moe["router"]
    num_experts, top_k = moe["num_experts"], moe["experts_per_token"]
    logits = F.linear(tokens, params[prefix + "router.weight"], params.get(prefix + "router.bias"))
    if router["score_function"] == "softmax":
        scores = probabilities = logits.softmax(-1)
    else:
        scores = logits.sigmoid()
        probabilities = scores / scores.sum(-1, keepdim=True)
    keys = scores.detach()
    if router["expert_bias"]:
        keys = keys + params[prefix + "router.expert_bias"].detach()
    experts = choose(keys, router, top_k)
    weights = scores.gather(1, experts)
    if router["normalize_top_k"]:
        weights = weights / weights.sum(-1, keepdim=True)
    weights = weights * router["scaling_factor"]
    # Load balancing counts routing before any capacity drop, as a constant fraction per expert.
    counts = F.one_hot(experts, num_experts).sum((0, 1))
    if loads is not None:
        loads[prefix] = loads.get(prefix, 0) + counts
    fraction = counts.to(tokens.dtype) / experts.numel()
    balance = num_experts * (fraction * probabilities.mean(0)).sum()
    z_loss = logits.logsumexp(-1).pow(2).mean()
    auxiliary = router["aux_loss_coefficient"] * balance + router["z_loss_coefficient"] * z_loss
    return experts, weights, auxiliary


def kept_slots(experts, moe):
    """[T, K] mask of the (token, slot) pairs their expert keeps: with a capacity factor, each
    expert keeps its first C = ceil(factor * T * K / E) assignments in token order (a token
    picks an expert at most once, so slot order within a token never matters); else all."""
    factor = moe.get("capacity_factor")
    if factor is None:
        return torch.ones_like(experts, dtype=torch.bool)
    num_experts = moe["num_experts"]
    capacity = math.ceil(factor * experts.numel() / num_experts)
    per_token = F.one_hot(experts, num_experts).sum(1)  # [T, E], 0 or 1
    earlier = per_token.cumsum(0) - per_token           # each expert's assignments before token t
    return earlier.gather(1, experts) < capacity


def moe_mlp(h, params, prefix, model, loads=None):
    """A MoE MLP on h [batch, seq, H]: routed experts weighted by the router, plus the (optionally
    gated) shared experts. Returns the output and the layer's auxiliary loss."""
    moe = model["moe"]
    batch, seq, hidden_size = h.shape
    tokens = h.reshape(batch * seq, hidden_size)
    experts, weights, auxiliary = route(tokens, params, prefix, moe, loads)
    kept = kept_slots(experts, moe)
    output = torch.zeros_like(tokens)
    for expert in range(moe["num_experts"]):
        token, slot = ((experts == expert) & kept).nonzero(as_tuple=True)
        expert_output = mlp(tokens[token], params, prefix + "experts.", model, expert)
        output = output.index_add(0, token, weights[token, slot, None] * expert_output)
    if moe["num_shared_experts"] > 0:
        shared = mlp(tokens, params, prefix + "shared.", model)
        if moe["shared_expert_gate"]:
            shared = shared * F.linear(tokens, params[prefix + "shared_gate.weight"]).sigmoid()
        output = output + shared
    return output.view(batch, seq, hidden_size), auxiliary


def latent_attention_heads(h, params, p, model):
    """Multi-head latent attention's queries, keys and values [batch, seq, heads, dim] (DeepSeek-V2
    section 2.1, DeepSeek-V3's modeling code): queries from a normalised low-rank latent (or
    straight from h), keys' position-free parts and values from a normalised shared latent, one
    rotary key for all heads; rotary positions on the rotary parts alone."""
    mla = model["mla"]
    batch, seq, _ = h.shape
    heads, nope, rope = model["num_attention_heads"], mla["qk_nope_head_dim"], mla["qk_rope_head_dim"]
    if mla["q_lora_rank"] > 0:
        latent = F.linear(h, params[p + "attention.q_down.weight"])
        q = F.linear(norm(latent, params, p + "attention.q_latent_norm", model),
                     params[p + "attention.q_up.weight"])
    else:
        q = F.linear(h, params[p + "attention.q.weight"])
    q_nope, q_rope = q.view(batch, seq, heads, nope + rope).split([nope, rope], dim=-1)
    compressed, k_rope = F.linear(h, params[p + "attention.kv_down.weight"]).split(
        [mla["kv_lora_rank"], rope], dim=-1)
    kv = F.linear(norm(compressed, params, p + "attention.kv_latent_norm", model),
                  params[p + "attention.kv_up.weight"]).view(batch, seq, heads, -1)
    k_nope, v = kv.split([nope, mla["v_head_dim"]], dim=-1)
    q_rope = rotate_half(q_rope, model["rope_theta"])
    k_rope = rotate_half(k_rope.view(batch, seq, 1, rope), model["rope_theta"])
    q = torch.cat([q_nope, q_rope], dim=-1)
    k = torch.cat([k_nope, k_rope.expand(batch, seq, heads, rope)], dim=-1)
    return q, k, v


def transformer_layer(x, layer, params, model, loads):
    """One pre-norm layer (attention, then the dense or MoE MLP): (output, auxiliary loss). An MTP
    module's layer (index >= num_layers) is of the kind of the model's last layer."""
    batch, seq, _ = x.shape
    heads, kv_heads, head_dim = model["num_attention_heads"], model["num_kv_heads"], model["head_dim"]
    kind = min(layer, model["num_layers"] - 1)
    auxiliary = x.new_zeros(())
    p = f"layers.{layer}."
    h = norm(x, params, p + "attention_norm", model)
    if model.get("mla"):
        q, k, v = latent_attention_heads(h, params, p, model)
    else:
        qkv = F.linear(h, params[p + "attention.qkv.weight"], params.get(p + "attention.qkv.bias"))
        q, k, v = qkv.split([heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
        q = q.view(batch, seq, heads, head_dim)
        k = k.view(batch, seq, kv_heads, head_dim)
        v = v.view(batch, seq, kv_heads, head_dim)
        if model.get("qk_norm", False):  # Qwen3: over each head's features, before rotation
            q = norm(q, params, p + "attention.q_norm", model)
            k = norm(k, params, p + "attention.k_norm", model)
        if model["position_embedding"] == "rope":
            q, k = rotate_half(q, model["rope_theta"]), rotate_half(k, model["rope_theta"])
        k = k.repeat_interleave(heads // kv_heads, dim=2)
        v = v.repeat_interleave(heads // kv_heads, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(head_dim)
    if model["position_embedding"] == "alibi":
        scores = scores + alibi_bias(heads, seq)
    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    window = model.get("sliding_window")
    if window and (not window.get("full_attention_interval")
                   or (kind + 1) % window["full_attention_interval"] != 0):
        # Query i sees keys i - size + 1 .. i (transformers' sliding_window rule).
        mask = mask | torch.ones(seq, seq, dtype=torch.bool).tril(-window["size"])
    scores = scores.masked_fill(mask, float("-inf"))
    if model.get("attention_sinks", False):
        # GPT-OSS: a per-head logit joins the softmax as a key without a value.
        sinks = params[p + "attention.sinks"].view(1, heads, 1, 1).expand(batch, heads, seq, 1)
        probabilities = torch.cat([scores, sinks], dim=-1).softmax(-1)[..., :-1]
    else:
        probabilities = scores.softmax(-1)
    attention = (probabilities @ v).transpose(1, 2).reshape(batch, seq, -1)
    x = x + F.linear(attention, params[p + "attention.output.weight"],
                     params.get(p + "attention.output.bias"))
    h = norm(x, params, p + "mlp_norm", model)
    if is_moe_layer(kind, model):
        output, auxiliary = moe_mlp(h, params, p + "mlp.", model, loads)
    else:
        output = mlp(h, params, p + "mlp.", model)
    return x + output, auxiliary


def embed(ids, params, model, shift=0):
    """Token (and learned position) embedding; an MTP module's positions are rolled `shift` places
    left with zeros rolled in, as Megatron-Core rolls its position ids with its token ids."""
    seq = ids.shape[1]
    x = params["embedding.word"][ids]
    if model["position_embedding"] == "learned":
        positions = torch.arange(seq) + shift
        x = x + params["embedding.position"][torch.where(positions < seq, positions, 0)]
    if model["embedding_norm"]:
        x = norm(x, params, "embedding.norm", model)
    return x


def roll_left(tokens, shift):
    """tokens[:, i + shift], 0 past the end (Megatron-Core's roll_tensor)."""
    rolled = torch.zeros_like(tokens)
    rolled[:, :tokens.shape[1] - shift] = tokens[:, shift:]
    return rolled


def model_loss(params, model, inputs, targets, loads=None):
    """(cross-entropy mean, the rest of the training objective): Strata logs the first and trains
    on their sum, so both are needed. The rest is the MoE layers' auxiliary losses and the
    multi-token-prediction loss (DeepSeek-V3, written from its report and Megatron-Core's
    MultiTokenPredictionLayer): module k embeds the token k ahead, normalises it and the previous
    module's normalised output (the main model's for k = 1), projects [embedding; hidden] with
    eh_proj, runs one layer, normalises, and scores the token k + 1 ahead with the shared head over
    the positions that have one; the modules' mean loss joins with weight loss_weight. A zero tensor
    for a dense model without MTP. With `loads`, each MoE layer's choices per expert are added to
    loads[prefix]."""
    seq = inputs.shape[1]
    x = embed(inputs, params, model)
    auxiliary = x.new_zeros(())
    for layer in range(model["num_layers"]):
        x, layer_auxiliary = transformer_layer(x, layer, params, model, loads)
        auxiliary = auxiliary + layer_auxiliary
    hidden = norm(x, params, "final_norm", model)
    head = params["embedding.word"] if model["tied_embeddings"] else params["lm_head.weight"]
    logits = F.linear(hidden, head)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    mtp = model.get("mtp")
    if mtp:
        modules = mtp["num_modules"]
        for k in range(1, modules + 1):
            p = f"layers.{model['num_layers'] + k - 1}."
            embedded = embed(roll_left(inputs, k), params, model, shift=k)
            combined = torch.cat([norm(embedded, params, p + "enorm", model),
                                  norm(hidden, params, p + "hnorm", model)], dim=-1)
            h, layer_auxiliary = transformer_layer(
                F.linear(combined, params[p + "eh_proj.weight"]), model["num_layers"] + k - 1,
                params, model, loads)
            auxiliary = auxiliary + layer_auxiliary
            hidden = norm(h, params, p + "final_norm", model)
            scored = seq - k
            module_logits = F.linear(hidden[:, :scored], head)
            labels = roll_left(targets, k)[:, :scored]
            auxiliary = auxiliary + mtp["loss_weight"] / modules * F.cross_entropy(
                module_logits.reshape(-1, module_logits.shape[-1]), labels.reshape(-1))
    return loss, auxiliary


def balance_expert_biases(params, model, loads):
    """Auxiliary-loss-free balancing after an optimizer step (DeepSeek-V3): each expert's bias
    moves by +rate where its choices over the step's tokens are below the mean, -rate above."""
    router = model["moe"]["router"] if model.get("moe") else None
    if not router or not router["expert_bias"]:
        return
    with torch.no_grad():
        for prefix, counts in loads.items():
            counts = counts.double()
            step = torch.sign(counts.mean() - counts) * router["expert_bias_update_rate"]
            params[prefix + "router.expert_bias"] += step.float()


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

    loss, auxiliary = model_loss(params, model, inputs, targets)
    (loss + auxiliary).backward()
    for parameter in params.values():
        if parameter.grad is None:  # no path to the loss: an expert bias steers the choice only
            parameter.grad = torch.zeros_like(parameter)
    loss_error = abs(loss.item() - case["loss"]) / abs(loss.item())
    print(f"{model['name']}: loss torch {loss.item():.7f} strata {case['loss']:.7f} "
          f"relative error {loss_error:.2e}")
    if loss_error > TOLERANCE:
        failures.append(f"loss relative error {loss_error:.2e}")
    worst_name, worst = None, 0.0
    # A gradient that is zero in exact arithmetic (a key norm's bias without rotary positions: the
    # softmax ignores what shifts a query's every score alike) is rounding noise on both sides, so
    # errors are relative to at least 1e-5 of the whole gradient's norm.
    floor = 1e-5 * float(torch.stack([p.grad.norm() for p in params.values()]).norm())
    for name, parameter in params.items():
        error = float((strata_gradients[name] - parameter.grad).norm() /
                      max(float(parameter.grad.norm()), floor))
        if error > worst:
            worst_name, worst = name, error
        if error > TOLERANCE:
            failures.append(f"gradient of {name}: relative error {error:.2e}")
    print(f"{model['name']}: {len(params)} gradients, worst relative error {worst:.2e} ({worst_name})")

    # The AdamW steps on the same batch, from the same initial weights: each steps on the
    # training objective and logs its cross-entropy, as Strata does.
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
        loads = {}
        loss, auxiliary = model_loss(params, model, inputs, targets, loads)
        (loss + auxiliary).backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), optimizer_config["max_grad_norm"])
        optimizer.step()
        balance_expert_biases(params, model, loads)
        error = abs(loss.item() - strata_loss) / abs(loss.item())
        print(f"{model['name']}: AdamW step {step + 1}: loss torch {loss.item():.7f} "
              f"strata {strata_loss:.7f} relative error {error:.2e}")
        if error > TOLERANCE:
            failures.append(f"AdamW step {step + 1}: loss relative error {error:.2e}")
    return failures


def distinct_shrunk_presets(strata, directory):
    """The model files of the tiny copies of every built-in model the executor trains, one per
    distinct copy (the GPT-3 family shrinks to one model): written by strata describe --shrink."""
    os.makedirs(directory, exist_ok=True)
    listing = subprocess.run([strata, "presets", "--format", "json"], check=True,
                             capture_output=True, text=True).stdout
    files, seen = [], set()
    for preset in json.loads(listing)["models"]:
        path = os.path.join(directory, preset["name"] + "-shrunk.json")
        report = subprocess.run([strata, "describe", "--model", preset["name"], "--shrink",
                                 "--write-model", path, "--format", "json"],
                                check=True, capture_output=True, text=True).stdout
        with open(path) as file:
            model = json.load(file)
        key = json.dumps({k: v for k, v in model.items() if k not in ("name", "description")},
                         sort_keys=True)
        if json.loads(report)["executor"]["trains"] and key not in seen:
            seen.add(key)
            files.append(path)
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exporter", required=True, help="export_reference_case binary")
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--models", nargs="+", default=["gpt-tiny", "llama-tiny"])
    parser.add_argument("--strata", help="the strata binary: with it, the tiny copy of every "
                        "preset the executor trains (strata describe --shrink) is checked too")
    arguments = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    failed = False
    models = list(arguments.models)
    if arguments.strata:
        models += distinct_shrunk_presets(arguments.strata, os.path.join(arguments.work_dir, "shrunk"))
    for model in models:
        directory = os.path.join(arguments.work_dir, os.path.basename(model).replace(".json", ""))
        subprocess.run([arguments.exporter, model, directory], check=True)
        failures = check_case(directory)
        for failure in failures:
            print(f"FAIL {model}: {failure}", file=sys.stderr)
        failed = failed or bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
