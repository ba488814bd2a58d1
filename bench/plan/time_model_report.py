#!/usr/bin/env python3
"""TIME_MODEL.md from a bench/plan/time_model.sh directory: predicted vs measured step per
recompute choice, rankings, Kendall's tau, and the categories of the extreme choices."""
import glob
import json
import os
import re
import statistics
import sys

out, threads, command = sys.argv[1], int(sys.argv[2]), sys.argv[3]
plan = json.load(open(os.path.join(out, "plan.json")))
L = None
pred = {}
for c in plan["candidates"]:
    key = (c["policy"], c["layers"])
    pred[key] = c
runs = {}
for path in sorted(glob.glob(os.path.join(out, "runs", "r*.jsonl"))):
    m = re.match(r"r(\d+)_(\w+)_(\d+)\.jsonl", os.path.basename(path))
    rec = json.loads(open(path).readline())
    runs.setdefault((m.group(2), int(m.group(3))), []).append(rec)
order = {"none": 0, "selective": 1, "full": 2}
keys = sorted(runs, key=lambda k: (order[k[0]], k[1]))
loads = [float(re.search(r"load average: ([0-9.]+)", l).group(1))
         for l in open(os.path.join(out, "load.txt")) if "load average" in l]


def name(k):
    return "none" if k[0] == "none" else f"{k[0]}, {k[1]} layers"


def measured(k):  # best round: median step's CPU time / threads
    return min(r["summary"]["step_cpu_s_p50"] for r in runs[k]) / threads


def rank(values):  # 1 = fastest
    s = sorted(values, key=lambda kv: kv[1])
    return {k: i + 1 for i, (k, _) in enumerate(s)}


def kendall_tau_b(xs, ys):
    n = len(xs)
    conc = disc = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif (dx > 0) == (dy > 0):
                conc += 1
            else:
                disc += 1
    denom = ((conc + disc + tx) * (conc + disc + ty)) ** 0.5
    return (conc - disc) / denom if denom else float("nan")


p = {k: pred[k]["step_seconds"] for k in keys}
m = {k: measured(k) for k in keys}
rp, rm = rank(p.items()), rank(m.items())
tau = kendall_tau_b([p[k] for k in keys], [m[k] for k in keys])
errs = [(p[k] - m[k]) / m[k] for k in keys]
spread = [(max(r["summary"]["step_cpu_s_p50"] for r in runs[k]) -
           min(r["summary"]["step_cpu_s_p50"] for r in runs[k])) /
          min(r["summary"]["step_cpu_s_p50"] for r in runs[k]) for k in keys if len(runs[k]) > 1]

print(f"# Time model against measured steps ({plan['model']}, B{plan['micro_batch']} T{plan['seq_len']}, {threads} thread{'s' if threads > 1 else ''})\n")
print(f"Command: `{command}`  ")
print(f"1-min load average before the runs: {min(loads):.2f} to {max(loads):.2f} (median {statistics.median(loads):.2f}).  ")
print("Measured: the median step's process CPU time / threads, best of the rounds (rounds interleave every choice). "
      "Predicted: `ljperf plan --device host --exhaustive` (time model from this host's measured rates).\n")
print("| choice | predicted | measured (rounds) | error | rank pred. | rank meas. |")
print("|---|---|---|---|---|---|")
for k in keys:
    rounds = " / ".join(f"{r['summary']['step_cpu_s_p50'] / threads:.3f}" for r in runs[k])
    print(f"| {name(k)} | {p[k]:.3f} s | {m[k]:.3f} s ({rounds}) | {100 * (p[k] - m[k]) / m[k]:+.1f}% | {rp[k]} | {rm[k]} |")
print()
print(f"- **Kendall tau (b): {tau:.3f}** over {len(keys)} choices.")
print(f"- Error: median {100 * statistics.median(errs):+.1f}%, range {100 * min(errs):+.1f}% … {100 * max(errs):+.1f}%; "
      f"|error| ≤ 10% for {sum(abs(e) <= 0.10 for e in errs)} of {len(errs)}.")
if spread:
    print(f"- Same choice between rounds: median {100 * statistics.median(spread):.1f}%, max {100 * max(spread):.1f}% ((max − min) / min).")
# The measurement's own reproducibility: the ranking of one round against another's.
nrounds = min(len(runs[k]) for k in keys)
pair_taus = []
for a in range(nrounds):
    for b in range(a + 1, nrounds):
        pair_taus.append(kendall_tau_b([runs[k][a]["summary"]["step_cpu_s_p50"] for k in keys],
                                       [runs[k][b]["summary"]["step_cpu_s_p50"] for k in keys]))
if pair_taus:
    print(f"- Kendall tau of one round's measured ranking against another's (the measurement's own ceiling): "
          + ", ".join(f"{t:.3f}" for t in pair_taus) + ".")
pr = sorted(p.values())
gaps = [(pr[i + 1] - pr[i]) / pr[i] for i in range(len(pr) - 1)]
print(f"- Predicted gap between neighbouring choices: median {100 * statistics.median(gaps):.2f}%, min {100 * min(gaps):.2f}%.")
print()
print("## By category (`--profile --profile-clock cpu`, best round by step; predicted from the plan)\n")
for k in [keys[0], keys[-1]]:
    best = min(runs[k], key=lambda r: r["summary"]["step_cpu_s_p50"])
    meas = best.get("profile", {}).get("seconds_per_step", {})
    pt = pred[k].get("step_times") or {}
    print(f"**{name(k)}**\n")
    print("| category | predicted ms | measured ms | error |")
    print("|---|---|---|---|")
    for c in sorted(set(pt) | set(meas), key=lambda c: -max(pt.get(c, 0), meas.get(c, 0))):
        a, b = 1e3 * pt.get(c, 0), 1e3 * meas.get(c, 0)
        e = f"{100 * (a - b) / b:+.1f}%" if b > 0 else "—"
        print(f"| {c} | {a:.1f} | {b:.1f} | {e} |")
    print()
