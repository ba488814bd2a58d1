#!/usr/bin/env python3
"""Writes the HF-parity fixtures that tests/model/ compares ljperf against.

Each fixture is one safetensors file holding, for a small LlamaForCausalLM (or Qwen2, Qwen3,
Mistral, Mixtral, Qwen3-MoE: FAMILIES) built by transformers in float32 with eager attention:
  - every parameter under its HF name (initial weights),
  - input_ids (B, T) int64 and labels (B, T) int64 (some -100: ignored),
  - logits (B, T, V) and loss () from model(input_ids, labels=labels),
  - grad.<name> for every parameter (one backward of that loss),
  - step<S>.<name> for every parameter after S AdamW steps on the same batch with linear warmup,
    cosine decay and global-norm clipping, and losses (S,) the loss before each step; S is the
    train metadata's total_steps: 5, and 10 for the mixture-of-experts fixtures.
The mixture-of-experts fixtures hold the experts as transformers 5 does in memory
(mlp.experts.gate_up_proj (E, 2F, C), mlp.experts.down_proj (E, C, F)), the names ljperf's
parameters have; with output_router_logits their loss includes router_aux_loss_coef times the
load-balancing loss, as MixtralForCausalLM's forward adds it.
The model's config.json (as transformers writes it) and the training hyper-parameters are in the
file's __metadata__ as JSON strings (config_json, train).

Regenerate (pinned: torch 2.15.0, transformers 5.24.0, safetensors 0.8.0, CPU):
  python3 -m venv /tmp/venv-ref && /tmp/venv-ref/bin/pip install torch==2.15.0 \
      transformers==5.24.0 safetensors==0.8.0 numpy
  /tmp/venv-ref/bin/python tools/ref/make_fixtures.py tests/model/fixtures [name ...]
With names, only those fixtures are (re)written.
"""
import json
import math
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          MixtralConfig, MixtralForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)

B, T = 2, 16
TRAIN = dict(max_lr=1e-2, min_lr=1e-3, warmup_steps=2, total_steps=5, beta1=0.9, beta2=0.95,
             eps=1e-8, weight_decay=0.1, grad_clip=0.5)
# The mixture-of-experts fixtures: 10 steps at half the peak lr (at 1e-2 the qwen3_moe model
# spikes at step 6, where fp32 rounding is amplified to 6e-5 of the loss).
TRAIN_MOE = dict(TRAIN, total_steps=10, max_lr=5e-3, min_lr=5e-4)

CONFIGS = {
    # Grouped-query attention (4 q heads, 2 kv heads) and llama3 rope scaling with a short
    # original context, so that all three frequency bands (kept, smoothed, divided) occur.
    "gqa_llama3": dict(vocab_size=128, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                       rope_theta=10000.0, tie_word_embeddings=False,
                       rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                         high_freq_factor=4.0, original_max_position_embeddings=32)),
    # Tied input and output embeddings (the LM head reads embed_tokens), plain rope.
    "tied": dict(vocab_size=128, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
                 rope_theta=500000.0, tie_word_embeddings=True),
    # head_dim (16) set explicitly, different from hidden_size / heads (48 / 4 = 12).
    "head_dim": dict(vocab_size=128, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                     max_position_embeddings=64, rope_theta=10000.0, tie_word_embeddings=False),
    # Qwen2: biases on q, k and v, tied embeddings, rope theta 1e6, RMSNorm eps 1e-6; a
    # sliding_window with use_sliding_window false, which transformers ignores.
    "qwen2": dict(family="qwen2", vocab_size=128, hidden_size=48, intermediate_size=96,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=64, rope_theta=1000000.0, tie_word_embeddings=True,
                  use_sliding_window=False, sliding_window=5, rms_norm_eps=1e-6),
    # Qwen2 with use_sliding_window: a window of 5 on the layers from max_window_layers (1) on,
    # layer 0 fully causal.
    "qwen2_window": dict(family="qwen2", vocab_size=128, hidden_size=48, intermediate_size=96,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, rope_theta=1000000.0,
                         tie_word_embeddings=False, use_sliding_window=True, sliding_window=5,
                         max_window_layers=1, rms_norm_eps=1e-6),
    # Qwen3: q_norm and k_norm over an explicit head_dim (16, not 48 / 4).
    "qwen3": dict(family="qwen3", vocab_size=128, hidden_size=48, intermediate_size=96,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  max_position_embeddings=64, rope_theta=1000000.0, tie_word_embeddings=False,
                  attention_bias=False, rms_norm_eps=1e-6),
    # Mistral with a sliding window of 5 at T = 16: query i sees keys i - 5 < j <= i.
    "mistral_window": dict(family="mistral", vocab_size=128, hidden_size=48,
                           intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, max_position_embeddings=64,
                           rope_theta=1000000.0, tie_word_embeddings=False, sliding_window=5),
    # Mixtral: top 2 of 8 experts, softmax then renormalised over the two; the load-balancing
    # loss in the loss (output_router_logits, coef 0.02). 64 routed rows over 8 experts.
    "mixtral": dict(family="mixtral", vocab_size=128, hidden_size=48, intermediate_size=64,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    max_position_embeddings=64, rope_theta=1000000.0, tie_word_embeddings=False,
                    num_local_experts=8, num_experts_per_tok=2, output_router_logits=True,
                    router_aux_loss_coef=0.02),
    # Qwen3-MoE: top 3 of 8 without renormalising (norm_topk_prob false), layer 1 dense
    # (mlp_only_layers, intermediate_size 96) between sparse layers 0 and 2 (experts of 32),
    # q/k norms over head_dim 16, the load-balancing loss on (coef 0.01).
    "qwen3_moe": dict(family="qwen3_moe", vocab_size=128, hidden_size=48, intermediate_size=96,
                      moe_intermediate_size=32, num_hidden_layers=3, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                      rope_theta=1000000.0, tie_word_embeddings=False, num_experts=8,
                      num_experts_per_tok=3, norm_topk_prob=False, decoder_sparse_step=1,
                      mlp_only_layers=[1], output_router_logits=True, router_aux_loss_coef=0.01,
                      rms_norm_eps=1e-6),
    # Qwen3-MoE with decoder_sparse_step 2 (layers 1 and 3 sparse, 0 and 2 dense), top 2 of 6
    # renormalised, tied embeddings, no auxiliary loss (output_router_logits false).
    "qwen3_moe_step": dict(family="qwen3_moe", vocab_size=128, hidden_size=48,
                           intermediate_size=64, moe_intermediate_size=24, num_hidden_layers=4,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                           max_position_embeddings=64, rope_theta=1000000.0,
                           tie_word_embeddings=True, num_experts=6, num_experts_per_tok=2,
                           norm_topk_prob=True, decoder_sparse_step=2, mlp_only_layers=[],
                           output_router_logits=False, rms_norm_eps=1e-6),
}

MOE_FAMILIES = {"mixtral", "qwen3_moe"}

# family -> (config class, model class); absent: Llama.
FAMILIES = {
    "llama": (LlamaConfig, LlamaForCausalLM),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM),
    "mistral": (MistralConfig, MistralForCausalLM),
    "mixtral": (MixtralConfig, MixtralForCausalLM),
    "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM),
}


def lr_at(step, t):
    """The schedule ljperf implements (train/lr_schedule.h): linear warmup, then cosine."""
    if step < t["warmup_steps"]:
        return t["max_lr"] * (step + 1) / t["warmup_steps"]
    progress = (step - t["warmup_steps"]) / max(1, t["total_steps"] - t["warmup_steps"])
    return t["min_lr"] + 0.5 * (t["max_lr"] - t["min_lr"]) * (1.0 + math.cos(math.pi * progress))


def make(name, cfg_kwargs, seed):
    torch.manual_seed(seed)
    kwargs = dict(cfg_kwargs)
    family = kwargs.pop("family", "llama")
    config_class, model_class = FAMILIES[family]
    kwargs.setdefault("rms_norm_eps", 1e-5)
    cfg = config_class(**kwargs, initializer_range=0.02, attn_implementation="eager",
                       torch_dtype=torch.float32)
    model = model_class(cfg).float()
    # Norm weights start at one and biases at zero in HF; perturb them so that the forward
    # depends on them and their gradients are tested non-trivially.
    # The routers get logits of a few units (std 0.3 over 48 inputs of unit scale), so that the
    # top-k choices are separated by far more than fp32 rounding, and ljperf and transformers
    # pick the same experts at every step (the smallest gap is printed).
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight") or n.endswith(".bias"):
                p.add_(0.1 * torch.randn_like(p))
            if n.endswith("mlp.gate.weight") and family in MOE_FAMILIES:
                p.normal_(0.0, 0.3)
    input_ids = torch.randint(0, cfg.vocab_size, (B, T))
    labels = input_ids.clone()
    labels[0, 3] = -100
    labels[1, 10:12] = -100

    out = {}
    params = dict(model.named_parameters())  # tied weights appear once
    for n, p in params.items():
        out[n] = p.detach().clone()
    out["input_ids"] = input_ids
    out["labels"] = labels

    model.zero_grad()
    res = model(input_ids=input_ids, labels=labels)
    res.loss.backward()
    out["logits"] = res.logits.detach().clone()
    out["loss"] = res.loss.detach().clone()
    for n, p in params.items():
        out["grad." + n] = p.grad.detach().clone()

    t = TRAIN_MOE if family in MOE_FAMILIES else TRAIN
    gaps = []
    if family in MOE_FAMILIES:
        def record_gap(module, args, output):
            probs = torch.softmax(output[0].float(), dim=-1).sort(dim=-1, descending=True).values
            k = module.top_k
            gaps.append((probs[:, k - 1] - probs[:, k]).min().item())
        for m in model.modules():
            if type(m).__name__.endswith("TopKRouter"):
                m.register_forward_hook(record_gap)
    opt = torch.optim.AdamW(model.parameters(), lr=t["max_lr"], betas=(t["beta1"], t["beta2"]),
                            eps=t["eps"], weight_decay=t["weight_decay"], foreach=False)
    losses = []
    for step in range(t["total_steps"]):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, t)
        opt.zero_grad()
        loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t["grad_clip"])
        opt.step()
        losses.append(loss.item())
    out["losses"] = torch.tensor(losses, dtype=torch.float32)
    for n, p in params.items():
        out[f"step{t['total_steps']}." + n] = p.detach().clone()
    if gaps:
        print(f"{name}: smallest gap between the k-th and (k+1)-th router probability over "
              f"{len(gaps)} router calls: {min(gaps):.3g}")

    # The Llama fixtures were written with only the keys that differ from LlamaConfig's defaults;
    # the others hold every key, so that no family default is left for ljperf to guess.
    config_json = cfg.to_json_string(use_diff=family == "llama")
    meta = {"config_json": config_json, "train": json.dumps(t),
            "torch": torch.__version__, "transformers": transformers.__version__}
    out = {k: v.contiguous() for k, v in out.items()}
    return out, meta


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/model/fixtures"
    torch.use_deterministic_algorithms(True)
    only = set(sys.argv[2:])
    for i, (name, kw) in enumerate(CONFIGS.items()):
        if only and name not in only:
            continue
        tensors, meta = make(name, kw, seed=1000 + i)
        path = f"{outdir}/{name}.safetensors"
        save_file(tensors, path, metadata=meta)
        print(f"{path}: loss {tensors['loss'].item():.6f}, losses {tensors['losses'].tolist()}")


if __name__ == "__main__":
    main()
