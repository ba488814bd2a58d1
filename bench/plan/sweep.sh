#!/usr/bin/env bash
# The recompute planner against an exhaustive sweep, measured on this host.
#
#   bench/plan/sweep.sh [--ljperf build/ljperf] [--out DIR] [--model small] [--batch-size 8]
#                       [--seq-len 256] [--steps 4] [--warmup-steps 1] [--reps 2]
#                       [--budgets "1040MiB 1090MiB 1140MiB"] [--compile]
#
# 1. Sweep: every recompute choice the planner searches (`ljperf plan --device cpu --exhaustive
#    --json` lists them: none, selective and full x block layers 1..L) is run with
#    `ljperf benchmark --out`; `--reps` rounds, each round runs every choice once
#    (interleaved, so a burst of load from other processes hits one round, not one choice).
#    Per choice: tokens/s of the median step (best round), peak RSS (VmHWM, highest round).
# 2. Budgets (default: the full-recompute and no-recompute measured peaks split at 25/50/75%):
#    for each, `CHECKPOINT_OPTIMIZATION=true ljperf benchmark --memory-limit B`, interleaved with
#    a rerun of the fastest sweep configuration whose MEASURED peak fits B (when the planner
#    chose another) and with `--recompute full` (the tokens/s ratio); the choice is compared
#    with that fastest fitting configuration, in the sweep and in the paired reruns.
# 3. Writes $out/SWEEP.md (tables) and keeps every record (*.jsonl) and log; `uptime` is
#    recorded before each run (load.txt).
set -euo pipefail
args="$*"

ljperf=build/ljperf
out=$(mktemp -d /tmp/ljperf_sweep.XXXXXX)
model=small batch=8 seq=256 steps=4 warmup=1 reps=2 budgets="" compile=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ljperf) ljperf=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --seq-len) seq=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup-steps) warmup=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --budgets) budgets=$2; shift 2 ;;
    --compile) compile=--compile; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1" >&2; echo "hint: see $0 --help" >&2; exit 2 ;;
  esac
done
[[ -x "$ljperf" ]] || { echo "error: $ljperf is not an executable" >&2; echo "hint: --ljperf build/ljperf" >&2; exit 2; }
mkdir -p "$out"
export OMP_WAIT_POLICY=passive
# The coefficients built into this ljperf (data/predictor_coefficients.json), not a user's calibration.
export XDG_CONFIG_HOME="$out/xdg"
here=$(cd "$(dirname "$0")" && pwd)
common=(--model "$model" --batch-size "$batch" --seq-len "$seq" --steps "$steps"
        --skip-steps "$warmup" $compile)

# The planner's own search space, and its predictions for each choice (no budget: all fit).
"$ljperf" plan --model "$model" --device cpu --batch-size "$batch" --seq-len "$seq" \
  --exhaustive --json $compile > "$out/plan.json"
mapfile -t choices < <(jq -r '.candidates | sort_by((if .policy == "none" then 0
    elif .policy == "selective" then 1 else 2 end), .layers)[] | "\(.policy) \(.layers)"' \
    "$out/plan.json")
echo "search space: ${#choices[@]} choices (${choices[*]// /:})"

flags_for() {  # policy layers -> benchmark flags
  if [[ $1 == none ]]; then echo "--recompute none"
  else echo "--recompute $1 --recompute-method block --recompute-layers $2"; fi
}
run() {  # name [flags...]: one benchmark run -> $out/runs/name.{jsonl,log}
  local name=$1; shift
  local rec="$out/runs/$name.jsonl"
  rm -f "$rec"
  echo "$name $(uptime)" >> "$out/load.txt"
  if ! "$ljperf" benchmark "${common[@]}" "$@" --out "$rec" > "$out/runs/$name.log" 2>&1; then
    echo "error: $name failed, see $out/runs/$name.log" >&2; tail -3 "$out/runs/$name.log" >&2
    exit 1
  fi
  jq -r --arg n "$name" '"\($n): \(.config.recompute): \(.summary.tokens_per_s | floor) tokens/s, peak RSS \(.summary.peak_rss_bytes / 1048576 | floor) MiB"' "$rec"
}

mkdir -p "$out/runs"; : > "$out/load.txt"
for ((r = 1; r <= reps; r++)); do
  for c in "${choices[@]}"; do
    read -r p k <<< "$c"
    # shellcheck disable=SC2046
    run "sweep_r${r}_${p}_${k}" $(flags_for "$p" "$k")
  done
done

if [[ -z "$budgets" ]]; then
  # 25/50/75% of the way from the full-recompute peak to the no-recompute peak (measured, MiB).
  budgets=$(jq -s -r '(map(select(.config.recompute_policy == "none")) | map(.summary.peak_rss_bytes) | max) as $none
      | (map(select(.config.recompute_policy == "full")) | map(.summary.peak_rss_bytes) | min) as $full
      | [0.25, 0.5, 0.75] | map((($full + . * ($none - $full)) / 104857.6 | floor) / 10 | "\(.)MiB") | join(" ")' \
      "$out"/runs/sweep_*.jsonl)
fi
echo "budgets: $budgets"
to_bytes() {  # 1040.5MiB -> bytes
  awk -v s="$1" 'BEGIN { n = s + 0; if (s ~ /GiB$/) n *= 1073741824; else if (s ~ /MiB$/) n *= 1048576; printf "%.0f", n }'
}
# Per budget: the planner's choice (what ckpt will run) and the sweep's fastest choice whose
# measured peak fits (best-round tokens/s, highest-round peak).
declare -A chosen fastest
for b in $budgets; do
  chosen[$b]=$("$ljperf" plan --model "$model" --device cpu --batch-size "$batch" --seq-len "$seq" \
    --memory-limit "$b" --json $compile | jq -r '.recommendation | "\(.policy) \(.layers)"')
  fastest[$b]=$(jq -s -r --argjson B "$(to_bytes "$b")" '
      group_by(.config.recompute)
      | map({p: .[0].config.recompute_policy,
             k: (if .[0].config.recompute_policy == "none" then 0 else .[0].config.recompute_layers end),
             tps: (map(.summary.tokens_per_s) | max), rss: (map(.summary.peak_rss_bytes) | max)})
      | map(select(.rss <= $B)) | max_by(.tps) | "\(.p) \(.k)"' "$out"/runs/sweep_*.jsonl)
  echo "budget $b: planner chooses ${chosen[$b]}, fastest fitting in the sweep: ${fastest[$b]}"
done
# Interleaved rounds: the checkpoint-optimized run, the sweep's fastest fitting choice again
# (paired, same conditions; skipped when it is the planner's choice) and full recompute.
for ((r = 1; r <= reps; r++)); do
  for b in $budgets; do
    CHECKPOINT_OPTIMIZATION=true run "ckpt_r${r}_${b}" --memory-limit "$b"
    if [[ "${fastest[$b]}" != "${chosen[$b]}" ]]; then
      read -r p k <<< "${fastest[$b]}"
      # shellcheck disable=SC2046
      run "fastest_r${r}_${b}" $(flags_for "$p" "$k")
    fi
    run "full_r${r}_${b}" --recompute full
  done
done
python3 "$here/sweep_report.py" "$out" "$0 $args" > "$out/SWEEP.md"
cat "$out/SWEEP.md"
echo "records, logs and SWEEP.md: $out"
