# The GPU time model against published Llama training runs (bench/plan/published/): every row of
# rows.tsv planned; the validation split's median error may not grow past what the model
# reports (src/plan/gpu_time_model.h kGpuValidationMedianError: 5.6% observed on 10 rows at this
# commit, fit 3.9% on 13). The same check with a bound below the observed figure must fail, so
# the test can. The check is Perl (check.pl, core modules only) and runs with no Python on PATH.
# Usage: bash plan_published_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"
export XDG_CONFIG_HOME="$TMP/xdg"  # the embedded defaults, whatever this user calibrated
command -v perl >/dev/null || fail "perl not found (build-essential brings it; check.pl needs only its core modules)"
check="$ROOT/bench/plan/published/check.sh"
# No Python on PATH, as in CI's fresh Debian root: only bash, dirname and perl.
mkdir -p nopy
for tool in bash dirname perl; do ln -sf "$(command -v "$tool")" "nopy/$tool"; done
nopy_path="$PWD/nopy"

PATH="$nopy_path" "$check" "$LJ" --max-validation-median 0.056 >check.txt 2>check.err ||
  fail "validation median above 5.6%: $(cat check.txt check.err)"
grep -q '^validation: 10 rows, median |error| ' check.txt || fail "no validation line: $(cat check.txt)"
grep -q '^fit: 13 rows, median |error| ' check.txt || fail "no fit line: $(cat check.txt)"
pass "published rows: $(grep '^validation: [0-9]' check.txt)"

# 5.0% is below the observed 5.6%: the check fails and says so.
rc=0
"$check" "$LJ" --max-validation-median 0.050 >tight.txt 2>tight.err || rc=$?
[ "$rc" -eq 1 ] || fail "a bound below the observed median did not fail (exit $rc)"
grep -q '^FAIL: validation median 5.6% is above 5.0%' tight.err || fail "no FAIL line: $(cat tight.err)"
pass "published rows: a tighter bound fails"
