#!/usr/bin/env bash
# Accuracy of the planner's CPU memory predictor: runs `ljperf benchmark --steps 3` over a list of
# configurations, fits what the causes leave (ljperf calibrate --results --per-node-term: a
# residual and bytes per graph node) on every other run and checks the fit on the rest, then prints predicted against measured peak RSS (VmHWM,
# what the kernel saw) with relative errors, median and max. Two runs are cross-checked against
# /usr/bin/time -v. accuracy_report.py writes $out/table.md: the per-run table and the median and
# max errors by set (fit, held out) and by compile on/off.
#
#   bench/plan/accuracy.sh [--ljperf build/ljperf] [--out DIR] [--configs FILE]
#
# A configuration is one line: "<model> <batch> <seq> [more benchmark flags]", e.g.
# "small 4 256 --recompute selective" or "tiny 2 128 --compile"; '#' starts a comment.
set -euo pipefail

ljperf=build/ljperf
out=$(mktemp -d /tmp/ljperf_accuracy.XXXXXX)
configs=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ljperf) ljperf=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1" >&2; echo "hint: see $0 --help" >&2; exit 2 ;;
  esac
done
[[ -x "$ljperf" ]] || { echo "error: $ljperf is not an executable" >&2; echo "hint: --ljperf build/ljperf" >&2; exit 2; }
mkdir -p "$out"
export OMP_WAIT_POLICY=passive
# The embedded defaults, whatever the user's config holds: the records carry the features, the
# coefficients are what this script fits.
export XDG_CONFIG_HOME="$out/xdg"

default_configs() {
  cat <<'LIST'
tiny 1 64
tiny 2 128
tiny 4 256
tiny 8 256
tiny 8 64
tiny 1 192
tiny 4 64
tiny 2 256
small 1 64
small 1 256
small 2 128
small 2 512
small 4 64
small 4 256
small 8 128
small 1 512
small 2 256
small 4 128
small 8 64
small 4 512
small 8 256
small 1 128
LIST
}
if [[ -n "$configs" ]]; then list=$(grep -v '^\s*#' "$configs" | grep -v '^\s*$'); else list=$(default_configs); fi

fit="$out/fit.jsonl"; check="$out/check.jsonl"; all="$out/all.jsonl"
: > "$fit"; : > "$check"; : > "$all"
i=0
while read -r model batch seq extra; do
  [[ -z "$model" ]] && continue
  rec="$out/run$i.jsonl"; rm -f "$rec"
  cmd=("$ljperf" benchmark --model "$model" --batch-size "$batch" --seq-len "$seq" --steps 3
       --skip-steps 1 --out "$rec")
  # shellcheck disable=SC2206
  [[ -n "${extra:-}" ]] && cmd+=($extra)
  if [[ $i -lt 2 ]]; then
    /usr/bin/time -v "${cmd[@]}" > "$out/run$i.log" 2> "$out/run$i.time"
    kb=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$out/run$i.time")
    own=$(jq -r '.summary.peak_rss_bytes' "$rec")
    echo "cross-check run $i ($model $batch $seq): /usr/bin/time -v max RSS $((kb * 1024)) B, VmHWM $own B"
  elif ! "${cmd[@]}" > "$out/run$i.log" 2>&1; then
    echo "run $i: $model $batch $seq ${extra:-}: FAILED, skipped ($(grep -m1 '^error' "$out/run$i.log"))"
    i=$((i + 1)); continue
  fi
  cat "$rec" >> "$all"
  if (( i % 2 == 0 )); then cat "$rec" >> "$fit"; else cat "$rec" >> "$check"; fi
  echo "run $i: $model batch $batch seq $seq ${extra:-}: measured $(jq -r '.summary.peak_rss_bytes' "$rec") B, predicted (defaults) $(jq -r '.plan.predicted_peak_rss_bytes' "$rec") B"
  i=$((i + 1))
done <<< "$list"

echo
echo "== fit on $(wc -l < "$fit") runs (every other one) =="
"$ljperf" calibrate --results "$fit" --per-node-term --out "$out/predictor_coefficients.json"
echo
echo "== held-out check on $(wc -l < "$check") runs =="
"$ljperf" calibrate --coefficients "$out/predictor_coefficients.json" --check "$check"
echo
echo "== all $i runs, fitted coefficients =="
"$ljperf" calibrate --coefficients "$out/predictor_coefficients.json" --check "$all"
echo
python3 "$(dirname "$0")/accuracy_report.py" "$out" > "$out/table.md"
tail -8 "$out/table.md"
echo
echo "records, the fitted model file and table.md (per-run table, summaries): $out"
