#!/usr/bin/env python3
"""PyTorch peer of `ljperf benchmark`: trains the transformers model its config.json names
(LlamaForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM, ...) on seeded synthetic tokens with ljperf's settings and prints one JSON line (tokens/s, peak RSS) that
`ljperf ablation --peer-results` reads.

Pinned (bench/peers/compare.sh installs them): torch==2.15.0, transformers==5.23.0, Python 3.11.

The model is an HF folder written by `ljperf init --model <preset> --out DIR`: the preset's own
config.json (so the shape is ljperf's one table, src/models/presets.cc, not a copy) and the same
initial weights. What matches `ljperf benchmark`:
  - precision: fp32, or with --precision bf16 mixed precision as ljperf's (f32 weights, AdamW
    and gradients; the forward and backward under torch.autocast(--device, torch.bfloat16), the
    loss in f32: what the DeepSpeed recipe does on a CPU); micro-batch x sequence length; `--steps` steps of which the first `--warmup-steps`
    are not measured; tokens/s = tokens per step / median measured step (ljperf's summary);
  - loss: mean cross-entropy over all B x T positions of next-token targets (ljperf's synthetic
    batch: tokens and targets are consecutive windows of one random stream); for a mixture of
    experts with output_router_logits, plus router_aux_loss_coef x the load-balancing loss
    transformers returns (as its own forward adds it when given labels, and as ljperf does);
  - AdamW lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on every parameter, global
    gradient-norm clipping at 1.0 (src/train/adamw.h, train_step.h);
  - threads: torch.set_num_threads (0: every core the process may use, as ljperf's 0);
  - attention: transformers' "sdpa" (PyTorch's scaled_dot_product_attention), ljperf's sdpa op.
Peak RSS is the process's VmHWM (getrusage ru_maxrss), as ljperf reports its own.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", required=True, help="HF folder from `ljperf init`")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (inductor)")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: autocast to bfloat16 (f32 master weights), as ljperf --precision bf16")
    p.add_argument("--round", type=int, default=0, help="written into the JSON line (0: omitted)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: the model, the batch and AdamW on the GPU (autocast on cuda), each "
                        "step timed to its end (synchronized), peak bytes from torch.cuda")
    a = p.parse_args()
    if a.steps <= 0 or not 0 <= a.warmup_steps < a.steps:
        sys.exit("error: need --steps > 0 and 0 <= --warmup-steps < --steps")

    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import AutoModelForCausalLM

    threads = a.threads if a.threads > 0 else len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    torch.manual_seed(a.seed)
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32,
                                             attn_implementation="sdpa")
    model.to(a.device)
    model.train()
    vocab = model.config.vocab_size
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)
    forward = torch.compile(model) if a.compile else model

    B, T = a.batch_size, a.seq_len
    gen = torch.Generator().manual_seed(a.seed)
    step_s, losses = [], []
    for step in range(a.steps):
        stream = torch.randint(0, vocab, (B, T + 1), generator=gen)
        x = stream[:, :T].contiguous().to(a.device)
        y = stream[:, 1:].contiguous().to(a.device)
        if a.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            out = forward(input_ids=x)
        loss = F.cross_entropy(out.logits.reshape(-1, vocab).float(), y.reshape(-1))
        if getattr(out, "aux_loss", None) is not None:
            loss = loss + model.config.router_aux_loss_coef * out.aux_loss.float()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if a.device == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        step_s.append(dt)
        losses.append(loss.item())
        print(f"peer step {step + 1}/{a.steps}: loss {loss.item():.4f}, {dt:.3f} s"
              f"{'  (warmup)' if step < a.warmup_steps else ''}", file=sys.stderr)

    p50 = statistics.median(step_s[a.warmup_steps:])
    out = {
        "peer": ("PyTorch compile" if a.compile else "PyTorch eager") +
                (" bf16 autocast" if a.precision == "bf16" else ""),
        "tokens_per_s": B * T / p50,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "step_s_p50": p50,
        "step_seconds": step_s,
        "final_loss": losses[-1],
        "model": os.path.basename(os.path.normpath(a.model_dir)),
        "architecture": model.config.architectures[0] if model.config.architectures else "",
        "batch_size": B,
        "seq_len": T,
        "precision": a.precision,
        "threads": threads,
        "steps": a.steps,
        "warmup_steps": a.warmup_steps,
        "device": a.device,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    if a.device == "cuda":
        out["gpu"] = torch.cuda.get_device_name()
        out["peak_device_allocated_bytes"] = torch.cuda.max_memory_allocated()
        out["peak_device_reserved_bytes"] = torch.cuda.max_memory_reserved()
    if a.round > 0:
        out["round"] = a.round
    print(json.dumps(out))


if __name__ == "__main__":
    main()
