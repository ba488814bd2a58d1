#!/usr/bin/env bash
# A/B of two ljperf binaries (before and after a change) on one benchmark, interleaved: each
# round runs A then B (B then A on even rounds), so load drifts hit both alike.
#   bench/speed/ab.sh --a OLD_LJPERF --b NEW_LJPERF [--rounds 3] [--steps 8]
#                     [--a-flags "..."] [--b-flags "..."] [benchmark flags...]
# (--a-flags / --b-flags: flags for one side only, e.g. the same binary eager against --compile.)
# Per run: tokens/s of the median step (wall), and the process CPU time per step: the
# benchmark's own "step CPU time p50" where the binary prints it, else the difference between a
# --steps N run and a --steps 2 run of the same binary (so start-up, compile and warmup cancel).
# On a shared host with --threads 1 that is the step's work without the time other processes
# held the core. Prints one line per run, then the medians, the B/A
# ratios of the medians, the paired B/A (each round's ratio: median and range) and the load
# before and after.
set -euo pipefail
a="" b="" rounds=3 steps=8 a_flags="" b_flags=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --a) a=$2; shift 2 ;;
    --b) b=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --a-flags) a_flags=$2; shift 2 ;;
    --b-flags) b_flags=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
for x in "$a" "$b"; do
  [ -x "$x" ] || { echo "error: '$x' is not an executable (pass --a and --b)" >&2; exit 1; }
done
[ "$steps" -gt 2 ] || { echo "error: --steps must be above 2" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

field() {  # field FILE TEXT: the first number after TEXT on its line
  grep -m1 -F "$2" "$1" | awk -v t="$2" '{s = substr($0, index($0, t) + length(t));
    match(s, /[0-9]+(\.[0-9]+)?/); print substr(s, RSTART, RLENGTH)}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
cpu_of() {  # cpu_of BIN STEPS OUT SIDE_FLAGS: runs, prints user+sys seconds of the process
  # shellcheck disable=SC2086  # SIDE_FLAGS is a list of words
  /usr/bin/time -f "%U %S" -o "$3.time" "$1" benchmark "${args[@]}" $4 --steps "$2" \
    --skip-steps "$(( $2 > 2 ? 2 : 1 ))" >"$3" 2>&1
  awk '{print $1 + $2}' "$3.time"
}
# Tokens per step: benchmark's defaults (batch 4, seq 256) where the flags do not set them.
batch=$(echo "${args[*]}" | sed -n 's/.*--batch-size \([0-9]*\).*/\1/p')
seq=$(echo "${args[*]}" | sed -n 's/.*--seq-len \([0-9]*\).*/\1/p')
tokens=$(( ${batch:-4} * ${seq:-256} ))
echo "load before: $(uptime)"
echo "flags: ${args[*]}  (A: $a $a_flags; B: $b $b_flags; steps $steps, $rounds rounds, tokens per step $tokens)"
for r in $(seq 1 "$rounds"); do
  order="a b"
  [ $((r % 2)) -eq 0 ] && order="b a"
  for w in $order; do
    bin=$a flags=$a_flags
    [ "$w" = b ] && bin=$b flags=$b_flags
    c_long=$(cpu_of "$bin" "$steps" "$work/$w$r.txt" "$flags")
    tps=$(field "$work/$w$r.txt" "tokens/s")
    if grep -q "step CPU time p50" "$work/$w$r.txt"; then  # the binary measures it per step
      cps=$(grep -m1 "step CPU time p50" "$work/$w$r.txt" | awk '{v = $5; u = $6;
        printf "%.3f", (u == "ms") ? v / 1000 : (u == "us") ? v / 1e6 : v}')
    else
      c_short=$(cpu_of "$bin" 2 "$work/$w$r.short.txt" "$flags")
      cps=$(awk -v l="$c_long" -v s="$c_short" -v n="$steps" 'BEGIN {printf "%.3f", (l - s) / (n - 2)}')
    fi
    echo "round $r $w: tokens/s $tps   CPU s/step $cps   ($(uptime | sed 's/.*load/load/'))"
    echo "$tps" >>"$work/$w.tps"
    echo "$cps" >>"$work/$w.cps"
  done
done
ta=$(median <"$work/a.tps") tb=$(median <"$work/b.tps")
ca=$(median <"$work/a.cps") cb=$(median <"$work/b.cps")
echo "median A: tokens/s $ta  CPU s/step $ca  tokens per CPU-s $(awk -v c="$ca" -v t="$tokens" 'BEGIN {printf "%.0f", t / c}')"
echo "median B: tokens/s $tb  CPU s/step $cb  tokens per CPU-s $(awk -v c="$cb" -v t="$tokens" 'BEGIN {printf "%.0f", t / c}')"
echo "B/A: tokens/s $(awk -v a="$ta" -v b="$tb" 'BEGIN {printf "%.3f", b / a}')x   CPU per step $(awk -v a="$ca" -v b="$cb" 'BEGIN {printf "%.3f", b / a}')x"
# Paired: each round's B/A (both runs of a round saw about the same host), then the median and the
# range over the rounds. On a shared guest whose steps move by 10-15% from minute to minute, this
# resolves what the ratio of the medians does not (bench/archive/speed.md, session 10).
paired() {  # paired A_FILE B_FILE: "median (min-max)" of B/A over the rounds
  paste "$1" "$2" | awk '{print $2 / $1}' | sort -g |
    awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
      printf "%.3fx (%.3f-%.3f)", m, v[1], v[NR]}'
}
echo "paired B/A over $rounds rounds: tokens/s $(paired "$work/a.tps" "$work/b.tps")   CPU per step $(paired "$work/a.cps" "$work/b.cps")"
echo "load after: $(uptime)"
