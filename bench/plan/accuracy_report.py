#!/usr/bin/env python3
"""Markdown table for bench/plan/accuracy.sh: accuracy_report.py OUT_DIR > table.md.

Reads OUT_DIR/run<i>.jsonl (one benchmark record each; even i: fit set, odd i: held out) and
OUT_DIR/predictor_coefficients.json (the coefficients calibrate --results fitted on the fit set), and prints
predicted against measured peak RSS per run with the summary by set and by compile on/off."""
import glob
import json
import os
import re
import statistics
import sys

out = sys.argv[1]
MiB = 1048576.0
m = json.load(open(os.path.join(out, "predictor_coefficients.json")))
c = m["cpu_memory"]
coef = [c["reserved_factor"], m["host"]["baseline_rss_bytes"], c["per_node_bytes"],
        c["per_param_bytes"], c.get("gemm_pack_bytes", 0.0)]
gemm_factor = c.get("gemm_buffer_factor", 1.0)


def predict(feats):
    """memory_model.h: resident blocks, residual, nodes, params, packing (0/1), then (7-feature
    records) the measured process baseline and oneDNN's GEMM buffer bytes."""
    p = sum(a * b for a, b in zip(coef, feats[:5] + [0.0] * (5 - len(feats[:5]))))
    if len(feats) >= 7:
        p += feats[5] + gemm_factor * feats[6]
    return p


def fmt_bytes(b):
    return f"{b / MiB / 1024:.2f} GiB" if b >= 1024 * MiB else f"{b / MiB:.1f} MiB"


runs = []
for path in glob.glob(os.path.join(out, "run*.jsonl")):
    i = int(re.search(r"run(\d+)\.jsonl$", path).group(1))
    with open(path) as f:
        rec = json.loads(f.readline())
    pred = predict(rec["plan"]["features"])
    meas = rec["summary"]["peak_rss_bytes"]
    runs.append((i, rec, pred, meas, (pred - meas) / meas))
runs.sort(key=lambda r: r[0])

baseline = next((r[1]["plan"]["features"][5] for r in runs
                 if len(r[1]["plan"]["features"]) >= 7), 0.0)
print(f"Fitted (calibrate --results --per-node-term on the "
      f"{sum(1 for r in runs if r[0] % 2 == 0)} even-numbered runs): rss = {coef[0]:.4f} x "
      f"allocator blocks (glibc-priced) + measured process baseline ({baseline / MiB:.2f} MiB) + "
      f"{gemm_factor:.2f} x oneDNN GEMM buffers (modelled) + residual {coef[1] / 1024:.1f} KiB + "
      f"{coef[2]:.0f} B/node (+ {coef[4] / MiB:.1f} MiB when oneDNN packs a GEMM, hosts without "
      f"the GEMM buffer model only)\n")
print("| # | set | model | batch | seq | recompute | compile | predicted | measured | error |")
print("|---|---|---|---|---|---|---|---|---|---|")
for i, rec, pred, meas, err in runs:
    cfg = rec["config"]
    print(f"| {i} | {'fit' if i % 2 == 0 else 'held out'} | {cfg['model']} | "
          f"{cfg['micro_batch']} | {cfg['seq_len']} | {cfg['recompute']} | "
          f"{'on' if cfg['compile'] else 'off'} | {fmt_bytes(pred)} | {fmt_bytes(meas)} | "
          f"{100 * err:+.2f}% |")


def summary(name, rows):
    if not rows:
        return
    e = sorted(abs(r[4]) for r in rows)
    under = min(0.0, min(r[4] for r in rows))
    print(f"| {name} | {len(rows)} | {100 * statistics.median(e):.2f}% | {100 * e[-1]:.2f}% | "
          f"{100 * under:+.2f}% |")


print("\n| runs | n | median abs error | max abs error | largest under-prediction |")
print("|---|---|---|---|---|")
summary("held out (odd)", [r for r in runs if r[0] % 2 == 1])
shape = lambda r: "shape" in str(r[1]["config"]["model"])
summary("held out, random shapes (never fitted)", [r for r in runs if r[0] % 2 == 1 and shape(r)])
summary("held out, presets", [r for r in runs if r[0] % 2 == 1 and not shape(r)])
summary("fit (even)", [r for r in runs if r[0] % 2 == 0])
summary("all", runs)
summary("all, compile off (eager)", [r for r in runs if not r[1]["config"]["compile"]])
summary("all, compile on", [r for r in runs if r[1]["config"]["compile"]])
summary("held out, compile off", [r for r in runs if r[0] % 2 == 1 and not r[1]["config"]["compile"]])
summary("held out, compile on", [r for r in runs if r[0] % 2 == 1 and r[1]["config"]["compile"]])

# As the runs printed it: the shipped coefficients (data/predictor_coefficients.json), nothing
# fitted on this host or configuration: what a new user gets.
shipped = [(i, rec, rec["plan"]["predicted_peak_rss_bytes"], meas,
            (rec["plan"]["predicted_peak_rss_bytes"] - meas) / meas)
           for i, rec, _, meas, _ in runs]
summary("all, shipped coefficients (nothing fitted here)", shipped)
summary("random shapes, shipped coefficients", [r for r in shipped if shape(r)])
