#!/usr/bin/env python3
"""Fits the GPU time model's coefficients (src/plan/gpu_time_model.cc) on the rows of split
`fit` in rows.tsv: runs `ljperf plan --json` on each for the step's work (GEMM and attention
FLOPs, memory-bound bytes, kernels), then searches the efficiencies that minimise the squared
log error of tokens/s/GPU. Prints the coefficients and every row's error, fit and validation
apart. Usage: fit.py path/to/ljperf"""
import math
import statistics
import sys

import rows as R

# Catalog figures (src/plan/device_catalog.cc) the pricing needs.
PEAK = {"h100": 989.4e12, "a100": 312e12}
HBM = {"h100": 3.35e12, "a100": 2.039e12}
NVLINK = {"h100": 450e9, "a100": 300e9}
FABRIC = {"h100": 50e9, "a100": 25e9}
ADAM_BYTES = 30
# Published ranges the attention efficiencies are held in: FlashAttention-2 (Dao 2023,
# arXiv:2307.08691) reaches 50-73% of the A100's peak; on H100 FlashAttention-2 reaches 35% at
# most (FlashAttention-3, Shah et al. 2024, arXiv:2407.08608) and PyTorch's SDPA forward measured
# 288 TFLOP/s at T 8192, D 128 (pytorch/benchmark d5f0a12, PR #2296): 0.29 of 989.
BOUNDS = {"a100.attn_fwd": (0.50, 0.73), "h100.attn_fwd": (0.25, 0.35)}

# Held fixed (priors, not fitted): kernel launch cost and the collectives' efficiencies.
FIXED = {"kernel_seconds": 5e-6, "nvlink_efficiency": 0.8, "fabric_efficiency": 0.8}


def collective(nbytes, ranks, bw):
    """A reduce-scatter or all-gather of nbytes over a ring of `ranks`: NCCL's ring latency
    (src/graph/tuning.cc, Simple: 8.4 us + 3.4 us per NVLink step + 9.6 us per network step)
    plus (w-1)/w of the bytes over the link (src/plan/gpu_collectives.cc)."""
    nodes = math.ceil(ranks / 8)
    steps, inter = ranks - 1, nodes - 1
    return 8.4e-6 + (steps - inter) * 3.4e-6 + inter * 9.6e-6 + (ranks - 1) / ranks * nbytes / bw


def bucketed(params, bucket, ranks, bw):
    full, rest = divmod(params, bucket)
    s = full * collective(2 * bucket, ranks, bw)
    return s + (collective(2 * rest, ranks, bw) if rest else 0)


def price(w, r, k, dev):
    peak = PEAK[dev]
    t = w["gemm_flops"] / (peak * k[dev + ".gemm"])
    t += (w["attention_forward_flops"] / (peak * k[dev + ".attn_fwd"]) +
          w["attention_backward_flops"] / (peak * k[dev + ".attn_bwd"]))
    hbm = HBM[dev] * k["hbm"]
    t += w["memory_bytes"] / hbm
    t += w["kernels"] * FIXED["kernel_seconds"]
    ranks = int(r["gpus"])
    params = w["params"]
    local = math.ceil(params / ranks) if int(r["zero"]) >= 1 else params
    compute = t
    t += ADAM_BYTES * local / hbm
    if ranks > 1:
        assert int(r["zero"]) == 3, "the rows are FSDP (ZeRO-3); price_gpu_step has the rest"
        if ranks <= 8:
            bw = NVLINK[dev] * FIXED["nvlink_efficiency"]
        else:
            fab = float(r["fabric_gbps"]) * 1e9 / 8 if float(r["fabric_gbps"]) > 0 else FABRIC[dev]
            # Across nodes a ring runs one channel per NIC: the node's NICs together carry it,
            # up to NVLink's rate.
            bw = min(NVLINK[dev], 8 * fab) * FIXED["fabric_efficiency"]
        # src/plan/gpu_collectives.h at HF's "auto" buckets: reduce hidden^2, prefetch 0.9 hidden^2.
        hidden = w["hidden"]
        reduce_bucket = min(hidden * hidden, params)
        prefetch = min(int(0.9 * hidden * hidden), params)
        comm = (bucketed(params, reduce_bucket, ranks, bw) +
                2 * bucketed(params, prefetch, ranks, bw))
        tail = collective(2 * reduce_bucket, ranks, bw) + collective(2 * prefetch, ranks, bw)
        t += max(comm - compute, 0) + tail
    tokens = int(r["micro_batch"]) * int(r["seq_len"])
    return tokens / t


def main():
    ljperf = sys.argv[1]
    rows = R.read_rows()
    work = {}
    for r in rows:
        j, c = R.plan(ljperf, r)
        w = dict(c["gpu_work"])
        w["params"] = j["params"]
        # The hidden size sets the buckets (HF's "auto": what `ljperf plan` takes without a JSON).
        w["hidden"] = {"llama3-8b": 4096, "llama3.1-70b": 8192, "llama2-7b": 4096,
                       "llama2-13b": 5120, "llama2-70b": 8192, "fms-34b": 8192,
                       "llama3.2-3b": 3072}[r["model"]]
        work[r["id"]] = w
    fit_rows = [r for r in rows if r["split"] == "fit"]
    k = {"h100.gemm": 0.6, "h100.attn_fwd": 0.3, "h100.attn_bwd": 0.3,
         "a100.gemm": 0.7, "a100.attn_fwd": 0.6, "a100.attn_bwd": 0.5, "hbm": 0.7}
    tied = [("h100.attn_fwd", "h100.attn_bwd"), ("a100.attn_fwd", "a100.attn_bwd")]
    free = [p for p in k if p not in ("h100.attn_bwd", "a100.attn_bwd")]

    def loss(k):
        return sum(math.log(price(work[r["id"]], r, k, r["device"]) / float(r["tps_published"]))**2
                   for r in fit_rows)

    step = 0.1
    while step > 1e-4:
        improved = False
        for p in free:
            for d in (step, -step):
                k2 = dict(k)
                lo, hi = BOUNDS.get(p, (0.05, 1.0))
                k2[p] = min(max(k[p] * (1 + d), lo), hi)
                for a, b in tied:
                    k2[b] = k2[a]
                if loss(k2) < loss(k):
                    k, improved = k2, True
        if not improved:
            step /= 2
    print("coefficients:", {p: round(v, 4) for p, v in k.items()}, "fixed:", FIXED)
    for split in ("fit", "validation"):
        errs = []
        for r in rows:
            if r["split"] != split:
                continue
            pred = price(work[r["id"]], r, k, r["device"])
            e = pred / float(r["tps_published"]) - 1
            errs.append(abs(e))
            print(f"  {split:<10} {r['id']:<32} published {float(r['tps_published']):>7.0f} "
                  f"predicted {pred:>7.0f} {100 * e:+6.1f}%")
        print(f"{split}: {len(errs)} rows, median {100 * statistics.median(errs):.1f}%, "
              f"worst {100 * max(errs):.1f}%")


if __name__ == "__main__":
    main()
