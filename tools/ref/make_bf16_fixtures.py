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

It also writes bf16_ops.safetensors (OPS, 280 KB): torch's bf16 results on fixed bf16 inputs,
which the test compares with ljperf's within one bf16 ulp (an f32 result does not match them):
  - gemm<i>.x (M, K), gemm<i>.w (N, K), gemm<i>.y = F.linear(x, w) (M, N), bf16 operands;
  - rms_norm.x (4, 16, 64), rms_norm.w (64,), rms_norm.y = F.rms_norm(x, (64,), w, eps=1e-5);
  - swiglu.gate, swiglu.up (4, 16, 96), swiglu.y = F.silu(gate) * up;
  - rope.x (2, 4, 16, 16) bf16, rope.cos, rope.sin (16, 16) f32 (HF's tables), rope.y =
    transformers' apply_rotary_pos_emb with cos and sin cast to bf16, as HF's forward does;
  - logits.<fixture> (B, T, V) for LOGITS: the forward of the fixture's initial weights and batch
    with the model cast to bf16 (DeepSpeed's bf16 forward: weights, residual stream and
    activations in bf16), RMSNorm and attention rounding where ljperf's eager graph rounds
    (bf16_logits says where that differs from transformers' code).

Regenerate (the venv of bench/peers; pinned: torch 2.15.0, transformers 5.23.0, safetensors 0.8.0;
the qwen2, qwen2_window, qwen3, mistral_window and the mixture-of-experts files were written with
transformers 5.24.0, bf16_ops.safetensors with transformers 5.25.0, its logits rewritten with
5.23.0 in session 23 when the attention's probabilities began to round; the other tensors
came out bit for bit the same):
  /tmp/peers-venv/bin/python tools/ref/make_bf16_fixtures.py tests/model/fixtures [name ...]
With names, only those fixtures are (re)written; the name `ops` writes bf16_ops.safetensors. The
model class is the config's model_type's (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
MistralForCausalLM, MixtralForCausalLM, Qwen3MoeForCausalLM).
"""
import json
import math
import sys

import torch
import torch.nn.functional as F
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import CONFIG_MAPPING, AutoModelForCausalLM

FIXTURES = ["gqa_llama3", "tied", "head_dim", "qwen2", "qwen2_window", "qwen3", "mistral_window",
            "mixtral", "qwen3_moe", "qwen3_moe_step"]
STEPS = 10
OPS = "ops"
OPS_SEED = 36
GEMMS = [(33, 48, 40), (32, 288, 48), (16, 1024, 32)]  # (M, K, N)
# The dense fixtures (bf16_ops.safetensors was written before the mixture-of-experts ones; the
# test compares these seven).
LOGITS = FIXTURES[:7]


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


def bf16_uniform(gen, shape, lo=-1.0, hi=1.0):
    return (torch.rand(shape, generator=gen) * (hi - lo) + lo).to(torch.bfloat16)


def rope_tables(seq_len, head_dim, theta=10000.0):
    """HF's default rotary tables (LlamaRotaryEmbedding without scaling), f32 (T, D)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    freqs = torch.arange(seq_len, dtype=torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rms_norm_rounded_rstd(self, x):
    """RMSNorm as ljperf's bf16 graph computes it: the statistics in f32, rstd rounded to bf16,
    then x * rstd and * weight each rounded (HF's LlamaRMSNorm keeps rstd in f32)."""
    rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
    return x * rstd.to(x.dtype) * self.weight


def attention_f32(module, q, k, v, mask, scaling, dropout=0.0, **kwargs):
    """Attention as ljperf's (and flash attention's) kernel: q @ k^T and the softmax in f32 from
    the bf16 q, k, v; the unnormalised probabilities e = exp(w - max) rounded to bf16 for e @ v
    (as flash attention and PyTorch's CPU flash kernel multiply them), the sum of e unrounded,
    f32 sums, the output rounded once. One key tile (T <= 64), so the running max is the row's.
    (HF's eager attention rounds the scores and the normalised probabilities to bf16.)"""
    from transformers.models.llama.modeling_llama import repeat_kv

    k = repeat_kv(k, module.num_key_value_groups).float()
    v = repeat_kv(v, module.num_key_value_groups).float()
    w = torch.matmul(q.float(), k.transpose(2, 3)) * scaling
    if mask is not None:
        w = w + mask[:, :, :, : k.shape[-2]].float()
    e = torch.exp(w - w.amax(dim=-1, keepdim=True))
    out = torch.matmul(e.to(torch.bfloat16).float(), v) * (1.0 / e.sum(dim=-1, keepdim=True))
    return out.to(q.dtype).transpose(1, 2).contiguous(), None


def linear_then_bias(self, x):
    """nn.Linear as ljperf's graph computes it: the GEMM rounded, then the bias added and rounded
    (F.linear adds Qwen2's q, k, v bias inside the GEMM, before its one rounding)."""
    y = F.linear(x, self.weight)
    return y if self.bias is None else y + self.bias


def bf16_logits(outdir, name):
    """The step-0 logits of DeepSpeed's bf16 forward (weights, residual stream and activations
    in bf16: the model cast to bf16) with ljperf's eager cast placement: RMSNorm, attention and
    biased projections as above, and the rotary tables computed in f32 and cast to bf16 (model.to() would round
    inv_freq to bf16 first). Every other op is transformers' own, in bf16."""
    import transformers.models.llama.modeling_llama as llama
    import transformers.models.mistral.modeling_mistral as mistral
    import transformers.models.qwen2.modeling_qwen2 as qwen2
    import transformers.models.qwen3.modeling_qwen3 as qwen3

    meta, tensors = load(f"{outdir}/{name}.safetensors")
    cfg_dict = json.loads(meta["config_json"])
    cfg = CONFIG_MAPPING[cfg_dict.get("model_type", "llama")](**cfg_dict)
    cfg._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(cfg).float()
    patches = [(llama.LlamaRMSNorm, "forward", rms_norm_rounded_rstd),
               (qwen2.Qwen2RMSNorm, "forward", rms_norm_rounded_rstd),
               (qwen3.Qwen3RMSNorm, "forward", rms_norm_rounded_rstd),
               (mistral.MistralRMSNorm, "forward", rms_norm_rounded_rstd)]
    patches += [(m, "eager_attention_forward", attention_f32)
                for m in (llama, qwen2, qwen3, mistral)]
    patches.append((torch.nn.Linear, "forward", linear_then_bias))
    saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in patches]
    try:
        for obj, attr, fn in patches:
            setattr(obj, attr, fn)
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(tensors[n])
            rotary = model.model.rotary_emb
            tables = {n: b.clone() for n, b in rotary.named_buffers()}
            model = model.to(torch.bfloat16)
            for n, b in tables.items():
                setattr(rotary, n, b)
            logits = model(input_ids=tensors["input_ids"]).logits
    finally:
        for obj, attr, fn in saved:
            setattr(obj, attr, fn)
    assert logits.dtype == torch.bfloat16
    return logits


def write_ops(outdir):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    gen = torch.Generator().manual_seed(OPS_SEED)
    out = {}
    for i, (m, k, n) in enumerate(GEMMS):
        x, w = bf16_uniform(gen, (m, k)), bf16_uniform(gen, (n, k))
        out[f"gemm{i}.x"], out[f"gemm{i}.w"], out[f"gemm{i}.y"] = x, w, F.linear(x, w)
    x, w = bf16_uniform(gen, (4, 16, 64), -2, 2), bf16_uniform(gen, (64,), 0.5, 1.5)
    out["rms_norm.x"], out["rms_norm.w"] = x, w
    out["rms_norm.y"] = F.rms_norm(x, (64,), w, eps=1e-5)
    gate, up = bf16_uniform(gen, (4, 16, 96), -4, 4), bf16_uniform(gen, (4, 16, 96))
    out["swiglu.gate"], out["swiglu.up"], out["swiglu.y"] = gate, up, F.silu(gate) * up
    x = bf16_uniform(gen, (2, 4, 16, 16))
    cos, sin = rope_tables(16, 16)
    y, _ = apply_rotary_pos_emb(x, x, cos[None].to(torch.bfloat16), sin[None].to(torch.bfloat16))
    out["rope.x"], out["rope.cos"], out["rope.sin"], out["rope.y"] = x, cos, sin, y
    for name in LOGITS:
        out[f"logits.{name}"] = bf16_logits(outdir, name)
    for k, v in out.items():
        assert v.dtype == torch.bfloat16 or k in ("rope.cos", "rope.sin"), k
    meta_out = {"seed": str(OPS_SEED), "gemms": json.dumps(GEMMS), "logits": json.dumps(LOGITS),
                "torch": torch.__version__, "transformers": transformers.__version__}
    path = f"{outdir}/bf16_ops.safetensors"
    save_file({k: v.contiguous() for k, v in out.items()}, path, metadata=meta_out)
    print(f"{path}: {len(out)} tensors")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/model/fixtures"
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    only = set(sys.argv[2:])
    if not only or OPS in only:
        write_ops(outdir)
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
