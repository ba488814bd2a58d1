"""Reads rows.tsv and runs `ljperf plan --json` on a row, for fit.py (a tool: the tests run
check.pl, its Perl twin, where no Python is installed)."""
import csv
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def read_rows():
    with open(os.path.join(HERE, "rows.tsv")) as f:
        lines = [l for l in f if not l.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t"))


def plan_args(r):
    model = r["model"]
    if not model.startswith("llama3"):
        model = os.path.join(HERE, "models", model + ".json")
    a = ["plan", "--json", "--model", model, "--device", r["device"], "--np", r["gpus"],
         "--zero", r["zero"], "--batch-size", r["micro_batch"], "--seq-len", r["seq_len"],
         "--recompute", r["recompute"], "--memory-limit", "100TiB"]
    if r["recompute"] != "none":
        a += ["--recompute-layers", r["recompute_layers"]]
    if r["compile"] == "yes":
        a.append("--compile")
    if int(r["gpus"]) > 8 and float(r["fabric_gbps"]) > 0:
        a += ["--fabric-gbps", r["fabric_gbps"]]
    return a


def plan(ljperf, r):
    out = subprocess.run([ljperf] + plan_args(r), capture_output=True, text=True)
    j = json.loads(out.stdout)
    layers = 0 if r["recompute"] == "none" else int(r["recompute_layers"])
    for c in j["candidates"]:
        if c["policy"] == r["recompute"] and c["layers"] == layers:
            return j, c
    raise RuntimeError("no candidate for " + r["id"])
