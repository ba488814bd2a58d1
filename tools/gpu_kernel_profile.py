#!/usr/bin/env python3
"""Sums an Nsight Compute CSV (one row per kernel launch, `ncu --csv --page raw --print-units base
--metrics gpu__time_duration.sum`) of a whole `ljperf benchmark --device cuda` run into where the
GPU's time went: per kernel class (cuBLAS GEMMs, attention, NVRTC-fused, the rest) and the kernels
that took most, each as milliseconds per step (the sum over the run divided by --steps).

usage: tools/gpu_kernel_profile.py CSV --steps N [--top K]
"""
import argparse
import collections
import csv
import sys


def kernel_class(name):
    n = name.lower()
    if any(s in n for s in ("gemm", "xmma", "cutlass", "cublas", "sm90_", "nvjet")):
        return "gemm (cuBLAS)"
    if "flash" in n or "sdpa" in n or "attention" in n:
        return "attention"
    if n.startswith("lj_k_"):  # codegen/cuda/cuda_kernel_cache.cc's entry names
        return "fused (NVRTC)"
    return "other"


def read_rows(path):
    # ncu writes "==PROF==" and the program's own lines around the CSV: keep the quoted rows.
    with open(path, newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows:
        sys.exit("gpu_kernel_profile: no CSV rows in " + path)
    head = rows[0]
    try:
        name_col = head.index("Kernel Name")
        time_col = head.index("gpu__time_duration.sum")
    except ValueError:
        sys.exit("gpu_kernel_profile: no 'Kernel Name' or 'gpu__time_duration.sum' column")
    out = []
    for r in rows[1:]:
        if len(r) <= max(name_col, time_col):
            continue
        try:
            out.append((r[name_col], float(r[time_col].replace(",", ""))))
        except ValueError:
            continue  # the units row
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    rows = read_rows(a.csv)
    total_ns = sum(t for _, t in rows)
    by_class = collections.Counter()
    by_name = collections.Counter()
    count = collections.Counter()
    for name, t in rows:
        by_class[kernel_class(name)] += t
        by_name[name] += t
        count[name] += 1
    per = 1e6 * a.steps  # ns -> ms per step
    print("%d launches, %.1f ms of kernel time per step (over %d steps)" %
          (len(rows), total_ns / per, a.steps))
    for c, t in by_class.most_common():
        print("  %-16s %9.2f ms  %5.1f%%" % (c, t / per, 100 * t / total_ns))
    print("top kernels (ms per step, launches per step, name):")
    for name, t in by_name.most_common(a.top):
        print("  %9.3f  %6.1f  %s" % (t / per, count[name] / a.steps, name[:150]))


if __name__ == "__main__":
    main()
