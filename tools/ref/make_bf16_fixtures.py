#!/usr/bin/env python3
"""Writes the bf16 mixed-precision parity fixtures that tests/model/bf16_parity_test.cc reads.

For each HF-parity fixture of make_fixtures.py (tests/model/fixtures/<name>.safetensors: config,
initial weights, one batch), it trains the model for 10 AdamW steps twice with transformers:
  - bf16: fp32 master weights (the model's parameters stay float32) and every forward under
    torch.autocast("cpu", dtype=torch.bfloat16); backward outside autocast; fp32 gradients,
    clipping and AdamW (foreach=False) on the fp32 parameters;
  - f32: the same steps without autocast (the gap between the two says how far bf16 rounding
    moves the losses on these models).
The schedule and hyper-parameters are make_fixtures.py's TRAIN with total_steps = 10.
Each output file <name>.bf16.safetensors is small; it holds
  - losses_bf16 (10,), losses_f32 (10,): the loss before each step,
  - norm_bf16.<name>, norm_f32.<name> (): the L2 norm of each parameter after the 10 steps,
and in __metadata__ the training settings (train) and the versions used.

Regenerate (the venv of bench/peers; pinned: torch 2.15.0, transformers 5.23.0, safetensors 0.8.0;
the qwen2, qwen2_window, qwen3, mistral_window and the mixture-of-experts files were written with
transformers 5.24.0):
  /tmp/peers-venv/bin/python tools/ref/make_bf16_fixtures.py tests/model/fixtures [name ...]
With names, only those fixtures are (re)written. The model class is the config's model_type's
(LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM, MixtralForCausalLM,
Qwen3MoeForCausalLM).
"""
import json
import math
import sys

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import CONFIG_MAPPING, AutoModelForCausalLM

FIXTURES = ["gqa_llama3", "tied", "head_dim", "qwen2", "qwen2_window", "qwen3", "mistral_window",
            "mixtral", "qwen3_moe", "qwen3_moe_step"]
STEPS = 10


def lr_at(t, step):
    """ljperf's schedule (train/lr_schedule.h): linear warmup, then cosine to min_lr."""
    if step < t["warmup_steps"]:
        return t["max_lr"] * (step + 1) / t["warmup_steps"]
    progress = (step - t["warmup_steps"]) / max(1, t["total_steps"] - t["warmup_steps"])
    return t["min_lr"] + 0.5 * (t["max_lr"] - t["min_lr"]) * (1.0 + math.cos(math.pi * progress))


def load(path):
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    return meta, tensors


def train(meta, tensors, train_cfg, bf16):
    cfg_dict = json.loads(meta["config_json"])
    cfg = CONFIG_MAPPING[cfg_dict.get("model_type", "llama")](**cfg_dict)
    cfg._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(cfg).float()
    params = dict(model.named_parameters())  # tied weights appear once
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(tensors[n])
    input_ids, labels = tensors["input_ids"], tensors["labels"]
    t = train_cfg
    opt = torch.optim.AdamW(model.parameters(), lr=t["max_lr"], betas=(t["beta1"], t["beta2"]),
                            eps=t["eps"], weight_decay=t["weight_decay"], foreach=False)
    losses = []
    for step in range(t["total_steps"]):
        for g in opt.param_groups:
            g["lr"] = lr_at(t, step)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        for p in model.parameters():
            assert p.dtype == torch.float32 and p.grad.dtype == torch.float32
        torch.nn.utils.clip_grad_norm_(model.parameters(), t["grad_clip"])
        opt.step()
        losses.append(loss.float().item())
    norms = {n: p.detach().double().norm().float() for n, p in params.items()}
    return torch.tensor(losses, dtype=torch.float32), norms


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/model/fixtures"
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    only = set(sys.argv[2:])
    for name in FIXTURES:
        if only and name not in only:
            continue
        meta, tensors = load(f"{outdir}/{name}.safetensors")
        train_cfg = dict(json.loads(meta["train"]), total_steps=STEPS)
        out = {}
        for bf16 in (True, False):
            tag = "bf16" if bf16 else "f32"
            losses, norms = train(meta, tensors, train_cfg, bf16)
            out["losses_" + tag] = losses
            for n, v in norms.items():
                out[f"norm_{tag}.{n}"] = v.reshape(())
        meta_out = {"train": json.dumps(train_cfg), "source": f"{name}.safetensors",
                    "autocast": "torch.autocast('cpu', dtype=torch.bfloat16)",
                    "torch": torch.__version__, "transformers": transformers.__version__}
        path = f"{outdir}/{name}.bf16.safetensors"
        save_file({k: v.contiguous() for k, v in out.items()}, path, metadata=meta_out)
        rel = ((out["losses_bf16"] - out["losses_f32"]).abs() / out["losses_f32"]).max().item()
        print(f"{path}: bf16 {out['losses_bf16'].tolist()}\n  f32 {out['losses_f32'].tolist()}"
              f"\n  max rel gap bf16 vs f32 {rel:.3g}")


if __name__ == "__main__":
    main()
