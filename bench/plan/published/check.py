#!/usr/bin/env python3
"""Runs `ljperf plan` on every row of rows.tsv and prints predicted against published
tokens/s/GPU with the error, fit and validation apart, then each split's median and worst.
With --max-validation-median X (a fraction), exits 1 when the validation median exceeds X.
Usage: check.py path/to/ljperf [--max-validation-median X] [--markdown]"""
import argparse
import statistics
import sys

import rows as R


def ranking(rows, results):
    """Published runs that differ only in activation checkpointing (same source, model, GPUs,
    batch, sequence, compile): does the planner order each pair of settings as published?"""
    groups = {}
    for r in rows:
        key = (r["source"], r["model"], r["device"], r["gpus"], r["micro_batch"], r["seq_len"],
               r["compile"])
        groups.setdefault(key, []).append(r)
    agree = total = 0
    print("recompute ranking (runs that vary activation checkpointing alone):")
    for key, g in groups.items():
        if len({(r["recompute"], r["recompute_layers"]) for r in g}) < 2:
            continue
        order = sorted(g, key=lambda r: -float(r["tps_published"]))
        print("  " + " > ".join(f"{r['ac_published']} ({float(r['tps_published']):.0f}; "
                                 f"predicted {results[r['id']]['tokens_per_s']:.0f})"
                                 for r in order) + f"  [{key[0]}, {key[1]}]")
        for i, x in enumerate(order):
            for y in order[i + 1:]:
                if (x["recompute"], x["recompute_layers"]) == (y["recompute"],
                                                               y["recompute_layers"]):
                    continue
                total += 1
                ok = results[x["id"]]["tokens_per_s"] > results[y["id"]]["tokens_per_s"]
                agree += ok
                if not ok:
                    gap = float(x["tps_published"]) / float(y["tps_published"]) - 1
                    print(f"    out of order: {x['id']} above {y['id']} as published "
                          f"(by {100 * gap:.1f}%)")
    print(f"recompute ranking: {agree} of {total} pairs in the published order")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ljperf")
    ap.add_argument("--max-validation-median", type=float, default=None)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    rows = R.read_rows()
    results = {}
    for r in rows:
        j, c = R.plan(a.ljperf, r)
        results[r["id"]] = c
    medians = {}
    for split in ("fit", "validation"):
        errs = []
        if a.markdown:
            print(f"\n| {split} row | published tokens/s/GPU | predicted | error | predicted MFU |")
            print("|---|---:|---:|---:|---:|")
        else:
            print(f"{split}:")
        for r in rows:
            if r["split"] != split:
                continue
            c = results[r["id"]]
            pub = float(r["tps_published"])
            e = c["tokens_per_s"] / pub - 1
            errs.append(abs(e))
            if a.markdown:
                print(f"| {r['id']} | {pub:,.0f} | {c['tokens_per_s']:,.0f} | {100 * e:+.1f}% | "
                      f"{100 * c['mfu']:.1f}% |")
            else:
                print(f"  {r['id']:<32} published {pub:>7.0f}  predicted {c['tokens_per_s']:>7.0f}"
                      f"  {100 * e:+6.1f}%  (step {c['step_seconds']:.3f} s, MFU "
                      f"{100 * c['mfu']:.1f}%)")
        medians[split] = statistics.median(errs)
        print(f"{split}: {len(errs)} rows, median |error| {100 * medians[split]:.1f}%, "
              f"worst {100 * max(errs):.1f}%")
    ranking(rows, results)
    bound = a.max_validation_median
    if bound is not None and medians["validation"] > bound + 1e-9:
        print(f"FAIL: validation median {100 * medians['validation']:.1f}% is above "
              f"{100 * bound:.1f}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
