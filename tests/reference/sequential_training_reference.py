#!/usr/bin/python3
"""`strata train --data-order sequential` with llm.c's settings against PyTorch, step by step.

Strata trains a GPT-2-shaped model for 10 steps with llm.c's data order and hyper-parameters
(constant learning rate, AdamW beta2 0.999, no weight decay, no clipping) on a data file small
enough that the loader wraps to its start within the run. This script, independently of Strata's
code, loads the same initial weights (Strata's step-0 checkpoint), reads the token file the way
llm.c's dataloader_next_batch does (B*T + 1 tokens from the current position, advance by B*T,
back to the start when fewer remain), trains with torch.optim.AdamW and checks each step's loss
against Strata's to 1e-5 (relative). The model is torch_reference.py's, built from the model
format. Run by CTest (test `sequential_training_reference`).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import model_loss  # noqa: E402  (the model, written from the format)

TOLERANCE = 1e-5
BATCH, SEQ, STEPS, LEARNING_RATE = 4, 64, 10, 1e-3
TEXT = "/usr/share/common-licenses/GPL-3"
TEXT_BYTES = 2000  # ⌊1,999 / (4 · 64)⌋ = 7 batches an epoch: step 8 starts the file again


def strata(binary, *arguments):
    run = subprocess.run([binary, *arguments], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"strata {' '.join(arguments)} failed: {run.stderr}")
    return run.stdout


def read_llmc_tokens(path):
    """llm.c's token file: 256 int32 of header (magic 20240520, version 1, count), then uint16."""
    header = np.fromfile(path, dtype=np.int32, count=256)
    assert header[0] == 20240520 and header[1] == 1, "not an llm.c token file"
    tokens = np.fromfile(path, dtype=np.uint16, offset=256 * 4)
    assert len(tokens) == header[2]
    return torch.tensor(tokens.astype(np.int64))


def llmc_batches(tokens, batch, seq, steps):
    """llm.c's dataloader_next_batch, step after step."""
    position = 0
    for _ in range(steps):
        if position + batch * seq + 1 > len(tokens):
            position = 0
        window = tokens[position:position + batch * seq + 1]
        yield window[:-1].view(batch, seq), window[1:].view(batch, seq)
        position += batch * seq


def load_checkpoint_weights(checkpoint):
    with open(os.path.join(checkpoint, "state.json")) as file:
        state = json.load(file)
    values = np.fromfile(os.path.join(checkpoint, "model.bin"), dtype=np.float32)
    params, offset = {}, 0
    for entry in state["parameters"]["layout"]:
        count = int(np.prod(entry["shape"]))
        params[entry["name"]] = torch.tensor(values[offset:offset + count].reshape(entry["shape"]),
                                             requires_grad=True)
        offset += count
    assert offset == len(values)
    return state["model"], params


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strata", required=True, help="the strata binary")
    parser.add_argument("--work-dir", required=True)
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    os.makedirs(arguments.work_dir, exist_ok=True)
    text = os.path.join(arguments.work_dir, "text.txt")
    with open(TEXT, "rb") as source, open(text, "wb") as out:
        out.write(source.read(TEXT_BYTES))
    tokens_file = os.path.join(arguments.work_dir, "tokens.bin")
    strata(arguments.strata, "data", "--text", text, "--out", tokens_file)

    common = ["train", "--model", "gpt-tiny", "--data", tokens_file, "--micro-batch", str(BATCH),
              "--global-batch", str(BATCH), "--seq-len", str(SEQ)]
    initial = os.path.join(arguments.work_dir, "initial")
    subprocess.run(["rm", "-rf", initial], check=True)
    strata(arguments.strata, *common, "--steps", "0", "--checkpoint-dir", initial)
    log = strata(arguments.strata, *common, "--steps", str(STEPS), "--data-order", "sequential",
                 "--lr", str(LEARNING_RATE), "--lr-schedule", "constant", "--beta2", "0.999",
                 "--weight-decay", "0", "--grad-clip", "0", "--log-format", "json")
    records = [json.loads(line) for line in log.splitlines()]
    strata_losses = [record["loss"] for record in records if "loss" in record]
    epochs = [record["epoch"] for record in records if "loss" in record]
    assert len(strata_losses) == STEPS, log

    model, params = load_checkpoint_weights(os.path.join(initial, "step_00000000"))
    assert model["dropout"] == 0, "a dropout mask cannot be replayed here"
    optimizer = torch.optim.AdamW(list(params.values()), lr=LEARNING_RATE, betas=(0.9, 0.999),
                                  eps=1e-8, weight_decay=0.0)
    tokens = read_llmc_tokens(tokens_file)
    failures = []
    for step, (inputs, targets) in enumerate(llmc_batches(tokens, BATCH, SEQ, STEPS)):
        optimizer.zero_grad()
        loss, auxiliary = model_loss(params, model, inputs, targets)  # MoE router losses, or 0
        (loss + auxiliary).backward()
        optimizer.step()
        error = abs(loss.item() - strata_losses[step]) / abs(loss.item())
        print(f"step {step + 1} (epoch {epochs[step]}): loss torch {loss.item():.7f} "
              f"strata {strata_losses[step]:.7f} relative error {error:.2e}")
        if error > TOLERANCE:
            failures.append(f"step {step + 1}: loss relative error {error:.2e}")
    if epochs[-1] < 1:
        failures.append("the run never wrapped to the start of the file")
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
