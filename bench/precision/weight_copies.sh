#!/usr/bin/env bash
# bf16 weights: casts at the point of use (BASE binary, before passes/master_weights) against
# persistent 16-bit copies written by AdamW with f32 weight-gradient GEMMs (NEW binary), and
# both against f32 (NEW), interleaved in rounds so that load changes hit every variant alike.
# `small`, T=256, eager and compiled, B=8 (model states dominate) and B=32 (activations do).
# Usage: bash weight_copies.sh BASE_LJPERF NEW_LJPERF OUT_TSV [ROUNDS]
# Prints one TSV row per run: round, binary, precision, mode, batch, tokens/s, kernels/step,
# peak RSS MiB, predicted MiB, load (1-minute average before the run).
set -euo pipefail
base=$1 new=$2 out=$3 rounds=${4:-3}
printf 'round\tbinary\tprecision\tmode\tbatch\ttokens_s\tkernels\tpeak_mib\tpredicted_mib\tload\n' >"$out"
run() {  # round label binary precision mode batch
  local r=$1 label=$2 bin=$3 prec=$4 mode=$5 b=$6 steps=${STEPS:-6} load log
  [ "$b" -ge 32 ] && steps=3
  load=$(cut -d' ' -f1 /proc/loadavg)
  log=$("$bin" benchmark --model small --batch-size "$b" --seq-len 256 --steps "$steps" --precision "$prec" \
    $([ "$mode" = compiled ] && echo --compile) 2>&1)
  local tps kern peak pred
  tps=$(grep -Eo 'tokens/s +[0-9.]+' <<<"$log" | head -1 | awk '{print $2}')
  kern=$(grep -Eo 'kernels/step +[0-9]+' <<<"$log" | awk '{print $2}')
  # "530.6 MiB" or "1.18 GiB", in MiB
  mib() { perl -ne 'if (/'"$1"' ([0-9.]+) (MiB|GiB)/) { printf "%.1f", $1 * ($2 eq "GiB" ? 1024 : 1); exit }'; }
  peak=$(mib 'process peak RSS' <<<"$log")
  pred=$(mib 'predicted peak RSS' <<<"$log")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$label" "$prec" "$mode" "$b" "$tps" "$kern" "$peak" "$pred" "$load" | tee -a "$out"
}
# Round 1: every configuration, memory and kernels (load-independent) and speed; later rounds:
# bf16 base vs new at B=8 only, for the speed ratio.
for r in $(seq 1 "$rounds"); do
  for b in 8 32; do
    [ "$r" -gt 1 ] && [ "$b" -gt 8 ] && continue
    for mode in eager compiled; do
      [ "$r" -eq 1 ] && run "$r" new "$new" f32 "$mode" "$b"
      run "$r" base "$base" bf16 "$mode" "$b"
      run "$r" new "$new" bf16 "$mode" "$b"
    done
  done
done
