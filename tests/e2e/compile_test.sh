# `ljperf benchmark --compile` as a user runs it: the compile log names the pattern-fusion passes
# and what they changed, the compiled step launches fewer kernels, and its losses are the eager
# run's (fusion changes fp32 rounding only, ~1e-7 relative: the 4 printed decimals agree; the
# check allows one unit of the last).
# Usage: bash compile_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

run() {  # run <name> [flags...]: the tiny model, 3 steps, 2 threads
  local name=$1
  shift
  "$LJ" benchmark --model tiny --steps 3 --skip-steps 1 --threads 2 "$@" >"$name.out" \
    2>"$name.err" || { cat "$name.err" >&2; fail "ljperf benchmark $* exited non-zero"; }
}

echo "check: --compile runs pattern fusion and logs it"
run eager
run compiled --compile
for p in rope_fusion swiglu_fusion rms_norm_fusion; do
  grep -Eq "^$p +yes " compiled.out || { cat compiled.out >&2; fail "compile log has no '$p  yes' row"; }
done
grep -q "rms_norm_fusion" eager.out && fail "the eager run logs a fusion pass"
pass "compile log: $(grep -cE '_fusion +yes ' compiled.out) fusion passes changed the graph"

echo "check: fewer kernels per step, the same losses"
k_eager=$(grep -E '^ *kernels/step' eager.out | tr -s ' ' | cut -d' ' -f3)
k_comp=$(grep -E '^ *kernels/step' compiled.out | tr -s ' ' | cut -d' ' -f3)
[ -n "$k_eager" ] && [ -n "$k_comp" ] || fail "no kernels/step line"
[ "$k_comp" -lt "$k_eager" ] || fail "compiled launches $k_comp kernels per step, eager $k_eager"
pass "kernels/step: eager $k_eager, compiled $k_comp"
losses() { grep -oE '^step: +[0-9]+ +loss: +[0-9.]+' "$1" | awk '{print $4}'; }
n=$(losses eager.err | wc -l)
[ "$n" -eq 3 ] && [ "$(losses compiled.err | wc -l)" -eq 3 ] || fail "expected 3 step lines each"
paste <(losses eager.err) <(losses compiled.err) |
  awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 0.00011) bad = 1 } END { exit bad }' ||
  { paste <(losses eager.err) <(losses compiled.err) >&2; fail "losses differ"; }
pass "losses equal over $n steps: $(losses compiled.err | tr '\n' ' ')"

echo "check: LJ_COMPILE=1 is --compile"
LJ_COMPILE=1 run env_compiled
grep -Eq "^rms_norm_fusion +yes " env_compiled.out || fail "LJ_COMPILE=1 did not compile"
pass "LJ_COMPILE=1 compiles"

e2e_finish
