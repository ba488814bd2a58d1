#!/usr/bin/env python3
"""Checks that a model folder written by ljperf loads in transformers and gives ljperf's logits.

Run by hand (needs torch + transformers, see make_fixtures.py for pinned versions):
  build/ljperf init --model tiny --out /tmp/ljm            # or `ljperf export` of a checkpoint
  python3 tools/ref/check_export.py build/ljperf /tmp/ljm
It writes a token file, runs `ljperf eval --dump-logits` on the first batch, loads the folder
with AutoModelForCausalLM.from_pretrained (Llama, Qwen2, Qwen3, Mistral, Mixtral or Qwen3-MoE,
as its config.json says), and compares logits and the mean loss (with the load-balancing term of
a mixture of experts whose config sets output_router_logits).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.numpy import load_file
from transformers import AutoModelForCausalLM

B, T = 2, 32


def main():
    ljperf, folder = sys.argv[1], sys.argv[2]
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, model.config.vocab_size, size=B * T + 1, dtype=np.uint32)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "tokens.u32")
        tokens.tofile(data)
        dump = os.path.join(tmp, "logits.safetensors")
        out = subprocess.run([ljperf, "eval", "--model", folder, "--data", data, "--data-format", "u32",
                              "--batch-size", str(B), "--seq-len", str(T), "--dump-logits", dump],
                             check=True, capture_output=True, text=True).stdout
        print(out.strip())
        lj_logits = load_file(dump)["logits"]
    ids = torch.tensor(tokens[:B * T].astype(np.int64)).view(B, T)
    # Windows: row b covers tokens[b*T : b*T+T], targets the next token.
    targets = torch.tensor(tokens[1:B * T + 1].astype(np.int64)).view(B, T)
    with torch.no_grad():
        out_hf = model(input_ids=ids)
        logits = out_hf.logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()
    # A mixture of experts with output_router_logits: the loss holds router_aux_loss_coef times the
    # load-balancing loss, as MixtralForCausalLM and Qwen3MoeForCausalLM add it given labels.
    if getattr(model.config, "output_router_logits", False):
        loss += model.config.router_aux_loss_coef * out_hf.aux_loss.item()
    diff = np.abs(logits.numpy() - lj_logits).max()
    scale = np.abs(logits.numpy()).max()
    lj_loss = float(out.split("loss ")[1].split()[0])
    print(f"transformers loaded {folder}: {sum(p.numel() for p in model.parameters())} params")
    print(f"logits max abs diff {diff:.3g} (max |logit| {scale:.3g}, rel {diff / scale:.3g})")
    print(f"loss: ljperf {lj_loss:.6f}  transformers {loss:.6f}  diff {abs(lj_loss - loss):.3g}")
    ok = diff / scale < 1e-5 and abs(lj_loss - loss) < 1e-5
    print("OK" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
