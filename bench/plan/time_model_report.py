#!/usr/bin/env python3
"""TIME_MODEL.md from a bench/plan/time_model.sh directory: the time model's predicted step
per recompute choice against `ljperf plan --measure` (every choice in one process, round-robin),
the rankings, Kendall's tau over every pair and over the pairs the measurement resolves, the
measurement's split-half tau, each choice's cost over `none`, and the categories."""
import glob
import json
import math
import os
import random
import re
import statistics
import sys

out, command = sys.argv[1], sys.argv[2]
plan = json.load(open(os.path.join(out, "plan.json")))
meas = plan["measured"]
threads = meas["threads"]
order = {"none": 0, "selective": 1, "full": 2}
pred_by = {(c["policy"], c["layers"]): c for c in plan["candidates"]}
mc = {(c["policy"], c["layers"]): c for c in meas["candidates"]}
keys = sorted(mc, key=lambda k: (order[k[0]], k[1]))
idx_json = [(c["policy"], c["layers"]) for c in meas["candidates"]]
loads = [(l.split()[0], float(re.search(r"load average: ([0-9.]+)", l).group(1)))
         for l in open(os.path.join(out, "load.txt")) if "load average" in l]


def name(k):
    return "none" if k[0] == "none" else f"{k[0]}, {k[1]} layers"


def kendall_tau_b(xs, ys):
    conc = disc = tx = ty = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
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
    d = ((conc + disc + tx) * (conc + disc + ty)) ** 0.5
    return (conc - disc) / d if d else float("nan")


def median_interval(d, confidence=0.95):
    """Median and sign-test interval [d(k), d(n+1-k)] (probe/measured_ranking.h)."""
    d = sorted(d)
    n = len(d)
    from math import comb
    cdf = []
    acc = 0.0
    for j in range(n + 1):
        acc += comb(n, j) / 2 ** n
        cdf.append(acc)
    k = 1
    while k + 1 <= (n + 1) // 2 and 1 - 2 * cdf[k] >= confidence:
        k += 1
    return statistics.median(d), d[k - 1], d[n - k], max(0.0, 1 - 2 * cdf[k - 1])


def rank(vals):  # 1 = fastest
    s = sorted(vals.items(), key=lambda kv: kv[1])
    return {k: i + 1 for i, (k, _) in enumerate(s)}


cpu = {k: mc[k]["cpu_seconds"] for k in keys}
wall = {k: mc[k]["wall_seconds"] for k in keys}
R = len(cpu[keys[0]])
p = {k: mc[k]["predicted_step_seconds"] for k in keys}
m = {k: statistics.median(cpu[k]) for k in keys}
mw = {k: statistics.median(wall[k]) for k in keys}
rp, rm = rank(p), rank(m)
tau = kendall_tau_b([p[k] for k in keys], [m[k] for k in keys])
tau_wall = kendall_tau_b([p[k] for k in keys], [mw[k] for k in keys])
# The same model with every recomputed kernel priced cold (before the hot pricing of kernels
# whose inputs the clone before them just produced): total + the saving the plan reports.
pc = {k: p[k] + pred_by.get(k, {}).get("recompute_hot_saving_seconds", 0.0) for k in keys}
tau_cold = kendall_tau_b([pc[k] for k in keys], [m[k] for k in keys])
errs = {k: (p[k] - m[k]) / m[k] for k in keys}
# Resolved pairs (by the measurement's clock, CPU unless --measure-clock wall): from ljperf.
resolved = set()
for i, c in enumerate(meas["candidates"]):
    for j in c["resolved_with"]:
        resolved.add(frozenset((idx_json[i], idx_json[j])))
conc = disc = 0
for i, a in enumerate(keys):
    for b in keys[i + 1:]:
        if frozenset((a, b)) not in resolved:
            continue
        dp, dm = p[a] - p[b], m[a] - m[b]
        if dp == 0 or dm == 0:
            continue
        if (dp > 0) == (dm > 0):
            conc += 1
        else:
            disc += 1
tau_res = (conc - disc) / (conc + disc) if conc + disc else float("nan")
npairs = len(keys) * (len(keys) - 1) // 2


def split_half(samples):
    even = [statistics.median(samples[k][0::2]) for k in keys]
    odd = [statistics.median(samples[k][1::2]) for k in keys]
    return kendall_tau_b(even, odd)


cfg = f"{plan['model']}, B{plan['micro_batch']} T{plan['seq_len']}, {threads} thread{'s' if threads > 1 else ''}"
print(f"# Time model against one-process round-robin measurement ({cfg})\n")
print(f"Command: `{command}`  ")
lo = [v for n, v in loads]
print(f"1-min load average: " + ", ".join(f"{n} {v:.2f}" for n, v in loads) +
      f" (min {min(lo):.2f}, max {max(lo):.2f}).  ")
print(f"Measured: `ljperf plan --measure`, {R} rounds in one process, "
      "one step of every choice per round (the first choice of a round moves on by one each round); per choice the "
      "median over the rounds of the step's process CPU time / threads (wall time beside it). "
      "Predicted: the time model (`ljperf plan --device cpu`) from this host's measured rates.\n")
print("| choice | predicted | measured CPU/thr | wall | error | rank pred. | rank meas. |")
print("|---|---|---|---|---|---|---|")
for k in keys:
    print(f"| {name(k)} | {p[k]:.3f} s | {m[k]:.3f} s | {mw[k]:.3f} s | {100 * errs[k]:+.1f}% | {rp[k]} | {rm[k]} |")
print()
e = list(errs.values())
print(f"- **Kendall tau (b), predicted vs measured (CPU): {tau:.3f}** over all {npairs} pairs; "
      f"**{tau_res:.3f} over the {conc + disc} pairs the measurement resolves** "
      f"(paired differences over the rounds, sign-test 95% interval excludes 0).")
print(f"- The measurement against itself: split-half tau (even rounds' medians vs odd rounds') "
      f"{split_half(cpu):.3f} in CPU time, {split_half(wall):.3f} in wall time.")
print(f"- Wall-time ranking against predicted: tau {tau_wall:.3f}.")
if any(pc[k] != p[k] for k in keys):
    print(f"- With every recomputed kernel priced cold (the model before hot pricing): tau {tau_cold:.3f}.")
print(f"- Error: median {100 * statistics.median(e):+.1f}%, range {100 * min(e):+.1f}% … {100 * max(e):+.1f}%; "
      f"|error| ≤ 10% for {sum(abs(x) <= 0.10 for x in e)} of {len(e)}.")
spread = [statistics.pstdev(cpu[k]) / m[k] for k in keys]
print(f"- One choice's step between rounds: median relative SD {100 * statistics.median(spread):.1f}% (CPU time).")
# Neighbours in the measured ranking that the measurement does not tell apart.
by_m = sorted(keys, key=lambda k: m[k])
unres = [(a, b) for a, b in zip(by_m, by_m[1:]) if frozenset((a, b)) not in resolved]
print(f"- Neighbours in the measured order not resolved: {len(unres)} of {len(by_m) - 1}"
      + (": " + "; ".join(f"{name(a)} / {name(b)}" for a, b in unres) if unres else "") + ".")
# The ceiling the noise puts on tau: a perfect model (its ranking the true one) against this
# measurement. Truth: each choice's mean log step over the rounds; noise: the rounds' residuals
# after each choice's mean and each round's mean (log scale), resampled. Since the truth is
# itself measured, its spread includes some noise: the ceiling is, if anything, optimistic.
rng = random.Random(1)
logs = {k: [math.log(v) for v in cpu[k]] for k in keys}
truth = {k: statistics.fmean(logs[k]) for k in keys}
round_mean = [statistics.fmean(logs[k][r] - truth[k] for k in keys) for r in range(R)]
resid = [logs[k][r] - truth[k] - round_mean[r] for k in keys for r in range(R)]
def ceiling(rounds, trials=400):
    taus = []
    tv = [truth[k] for k in keys]
    for _ in range(trials):
        est = [statistics.median(truth[k] + rng.choice(resid) for _ in range(rounds)) for k in keys]
        taus.append(kendall_tau_b(tv, est))
    return statistics.fmean(taus)
print(f"- Noise ceiling: a perfect model would reach tau {ceiling(R):.2f} against a measurement of "
      f"{R} rounds with this run's noise (residual SD {100 * statistics.pstdev(resid):.1f}% per step after "
      f"round effects); " + ", ".join(f"{ceiling(n):.2f} at {n} rounds" for n in (2 * R, 4 * R, 8 * R)) + ".")
print()
print("## Cost of each choice over `none` (paired: each round's step minus `none`'s in the same round)\n")
print("| choice | predicted | measured (95% interval) | predicted / measured |")
print("|---|---|---|---|")
base = ("none", 0)
slopes = {}
for k in keys:
    if k == base:
        continue
    d = [a - b for a, b in zip(cpu[k], cpu[base])]
    med, lo_, hi_, cov = median_interval(d)
    dp = p[k] - p[base]
    ratio = f"{dp / med:.2f}" if med > 0 else "—"
    print(f"| {name(k)} | {1e3 * dp:+.1f} ms | {1e3 * med:+.1f} ms [{1e3 * lo_:+.1f}, {1e3 * hi_:+.1f}] | {ratio} |")
    slopes.setdefault(k[0], []).append((k[1], dp, med))
print()
for pol, pts in slopes.items():
    sx = sum(x * x for x, _, _ in pts)
    sp = sum(x * a for x, a, _ in pts) / sx
    sm = sum(x * b for x, _, b in pts) / sx
    cold = {x: pc[(pol, x)] - pc[base] for x, _, _ in pts}
    sc = sum(x * cold[x] for x, _, _ in pts) / sx
    print(f"- {pol}: per recomputed layer predicted {1e3 * sp:.2f} ms (all cold: {1e3 * sc:.2f}), "
          f"measured {1e3 * sm:.2f} ms (least squares through 0), predicted / measured {sp / sm:.2f}.")
print()
profiles = sorted(glob.glob(os.path.join(out, "runs", "*.jsonl")))
if profiles:
    print("## By category (`benchmark --profile --profile-clock cpu`, one run each; predicted from the plan)\n")
    for path in profiles:
        rec = json.loads(open(path).readline())
        c = rec["config"]
        k = (c["recompute_policy"], c["recompute_layers"] if c["recompute_policy"] != "none" else 0)
        pt = pred_by.get(k, {}).get("step_times") or {}
        mrow = rec.get("profile", {}).get("seconds_per_step", {})
        print(f"**{name(k)}** (measured step CPU/thr {rec['summary']['step_cpu_s_p50'] / threads:.3f} s)\n")
        print("| category | predicted ms | measured ms | error |")
        print("|---|---|---|---|")
        for cat in sorted(set(pt) | set(mrow), key=lambda c: -max(pt.get(c, 0), mrow.get(c, 0))):
            a, b = 1e3 * pt.get(cat, 0), 1e3 * mrow.get(cat, 0)
            err = f"{100 * (a - b) / b:+.1f}%" if b > 0 else "—"
            print(f"| {cat} | {a:.1f} | {b:.1f} | {err} |")
        print()
