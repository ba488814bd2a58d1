# `ljperf ablation --np 2` as a user runs it: every configuration an MPI job of 2 ranks, base
# with blocking collectives and +comm (and the rows below it) overlapped, set through the
# DeepSpeed JSON the ablation writes per row (the user's --deepspeed keys kept); the table and
# results.json show exposed comm per step, the overlapped share and the largest rank's peak RSS.
# Refused with one error line and a hint: the ablation itself under mpirun, --np without mpirun.
# Skips (prints "SKIP: ...") without mpirun or an MPI build. Label dist (CMakeLists.txt).
# Usage: bash dist_ablation_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"
export XDG_CACHE_HOME=$TMP/cache
export TMPDIR=$TMP/tmp
mkdir -p "$TMPDIR"
mpi_e2e_init
mpi_flags=("${MPIRUN[@]:1}")

# --- (a) 2 rounds on tiny, 2 ranks: the four rows measured, comm shown ----------------------
echo "check: ljperf ablation --np 2 --model tiny --rounds 2 --steps 3 --out DIR"
rc=0
timeout 500 "$LJ" ablation --np 2 --model tiny --rounds 2 --steps 3 --seq-len 32 --threads 1 \
  --keep-logs --out out >a.out 2>a.err || rc=$?
[ "$rc" -eq 0 ] || { cat a.out a.err >&2; fail "ablation --np 2 exited $rc"; }
grep -q 'world size 2, 2 rounds' a.out || { cat a.out >&2; fail "the table does not say world size 2"; }
grep -Fq 'peak RSS per rank (measured, max over ranks, median)' a.out || fail "no per-rank peak RSS header"
for row in '^\| base \| — \| [0-9]+ \| [0-9]+–[0-9]+ \| 1\.00× \| — \| [0-9.]+ MiB \| [0-9.]+ MiB \| [0-9.]+ ms \| [0-9]+% of [0-9.]+ ms \|' \
  '^\| \+comm \| — \| [0-9]+ \| [0-9]+–[0-9]+ \| [0-9.]+× \| [0-9.]+× \| [0-9.]+ MiB \| [0-9.]+ MiB \| [0-9.]+ ms \| [0-9]+% of [0-9.]+ ms \|' \
  '^\| \+compile \| `--compile` \| [0-9]+ \|.* ms \| [0-9]+% of ' '^\| \+compile \+ckpt-opt \| `--compile --ckpt-opt` \| [0-9]+ \|.* ms \| [0-9]+% of '; do
  grep -Eq "$row" a.out || { cat a.out >&2; fail "no table row matching '$row'"; }
done
if grep -q 'n/a —' a.out; then cat a.out >&2; fail "a row is n/a at --np 2"; fi
pass "4 rows measured: $(grep -E '^\| (base|\+comm) ' a.out | cut -d'|' -f2,4,10,11 | tr '\n' ';')"
[ "$(grep -c '^ablation: round [12]/2 ' a.err)" -eq 8 ] || { cat a.err >&2; fail "expected 8 run lines on stderr"; }

logs=$(grep -Eo 'records and logs are in [^ ]+' a.err | awk '{print $NF}')
[ -n "$logs" ] && [ -f "$logs/round1_base.log" ] || { cat a.err >&2; fail "--keep-logs kept no logs"; }
# The children's own summaries: blocking for base, overlapped from +comm on.
grep -Eq 'overlapped [0-9]+% \(overlap_comm off\)' "$logs/round1_base.log" || fail "base did not block"
for c in comm compile compile_+ckpt-opt; do
  grep -Eq 'overlapped [0-9]+% \(overlap_comm on\)' "$logs/round1_$c.log" || fail "$c did not overlap"
done
grep -Eq '^data parallel: 2 ranks' "$logs/round1_comm.log" || fail "+comm did not run on 2 ranks"
pass "children: base overlap_comm off, +comm/+compile/+ckpt-opt on, 2 ranks each"

perl -MJSON::PP -e '
  local $/; open my $f, "<", "out/results.json" or die; my $j = decode_json(<$f>);
  die "world_size is not 2\n" unless $j->{world_size} == 2;
  my @rows = @{$j->{rows}};
  die "expected 4 rows\n" unless @rows == 4;
  for my $r (@rows) {
    die "$r->{name} not available\n" unless $r->{available};
    die "$r->{name}: expected 2 runs\n" unless @{$r->{runs}} == 2;
    for my $x (@{$r->{runs}}) {
      die "$r->{name}: run world_size\n" unless $x->{world_size} == 2;
      die "$r->{name}: no comm per step\n" unless $x->{comm_s_per_step} > 0;
      die "$r->{name}: exposed comm out of range\n"
        unless $x->{comm_exposed_s_per_step} >= 0 && $x->{comm_overlapped_share} >= 0 && $x->{comm_overlapped_share} <= 1;
      die "$r->{name}: peak RSS\n" unless $x->{peak_rss_bytes} > 0 && $x->{predicted_peak_rss_bytes} > 0;
    }
    die "$r->{name}: median comm missing\n" unless defined $r->{median}{comm_exposed_s_per_step};
  }
  die "base overlaps\n" if $rows[0]{overlap_comm};
  die "+comm blocks\n" unless $rows[1]{overlap_comm} && $rows[2]{overlap_comm} && $rows[3]{overlap_comm};
' || fail "results.json at --np 2 is not what the ablation measured"
pass "results.json: world size 2, 2 runs per row with comm, base blocking, the rest overlapped"

echo "check: --from re-renders the 2-rank table"
"$LJ" ablation --from out/results.json >d.out 2>d.err || { cat d.err >&2; fail "--from failed"; }
cmp -s a.out d.out || { diff a.out d.out >&2; fail "--from renders a different table"; }
pass "--from: same table"
rm -rf "$logs"

# --- (b) the user's --deepspeed keys are kept, overlap_comm set per row ---------------------
echo "check: --deepspeed FILE is merged into the rows' DeepSpeed JSON"
cat >ds.json <<'JSON'
{"zero_optimization": {"stage": 1, "reduce_bucket_size": 100000, "overlap_comm": true}}
JSON
rc=0
timeout 300 "$LJ" ablation --np 2 --model tiny --rounds 1 --steps 2 --seq-len 32 --threads 1 \
  --deepspeed ds.json --keep-logs >b.out 2>b.err || rc=$?
[ "$rc" -eq 0 ] || { cat b.out b.err >&2; fail "ablation --np 2 --deepspeed exited $rc"; }
logs=$(grep -Eo 'records and logs are in [^ ]+' b.err | awk '{print $NF}')
ds_keys() {  # FILE -> "stage bucket overlap" of its zero_optimization (a multi-line JSON file)
  perl -MJSON::PP -e 'local $/; my $z = decode_json(<>)->{zero_optimization};
    print join(" ", $z->{stage}, $z->{reduce_bucket_size}, $z->{overlap_comm} ? "true" : "false"), "\n"' "$1"
}
[ "$(ds_keys "$logs/ds_blocking.json")" = "1 100000 false" ] || fail "ds_blocking.json: $(cat "$logs/ds_blocking.json")"
[ "$(ds_keys "$logs/ds_overlap.json")" = "1 100000 true" ] || fail "ds_overlap.json: $(cat "$logs/ds_overlap.json")"
[ "$(json_get "$logs/round1_base.jsonl" 1 config.zero_stage)" = 1 ] || fail "base did not keep the file's stage 1"
[ "$(json_get "$logs/round1_base.jsonl" 1 config.reduce_bucket_size)" = 100000 ] || fail "base did not keep the file's bucket"
[ "$(json_get "$logs/round1_base.jsonl" 1 summary.overlap_comm)" = false ] || fail "base overlapped despite the override"
[ "$(json_get "$logs/round1_comm.jsonl" 1 summary.overlap_comm)" = true ] || fail "+comm did not overlap"
pass "stage 1 and reduce_bucket_size 100000 kept; overlap_comm false for base, true for +comm"
rm -rf "$logs"

# --- (c) refused: the ablation under mpirun; --np without mpirun on PATH ------------------
echo "check: ljperf ablation under mpirun is refused with the --np hint"
rc=0
timeout 120 mpirun "${mpi_flags[@]}" -np 2 "$LJ" ablation --model tiny >c.out 2>c.err || rc=$?
[ "$rc" -ne 0 ] || fail "ablation under mpirun was accepted"
grep -q 'starts its own MPI jobs' c.err || { cat c.out c.err >&2; fail "no error saying why"; }
grep -Fq 'ljperf ablation --np 2' c.err || { cat c.err >&2; fail "no --np hint"; }
pass "$(grep -m1 'error: ' c.err)"

echo "check: --np 2 without mpirun on PATH"
rc=0
PATH=/nonexistent "$LJ" ablation --np 2 --model tiny >e.out 2>e.err || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || fail "--np 2 without mpirun: exit $rc"
[ "$(grep -c '^error: ' e.err)" -eq 1 ] && grep -q '^hint: ' e.err || { cat e.err >&2; fail "expected one error line and a hint"; }
grep -q 'mpirun: none on PATH' e.err || { cat e.err >&2; fail "the error does not name mpirun"; }
pass "$(grep '^error: ' e.err)"

echo "check: --np 2 with a --deepspeed file that is missing or not a JSON object"
for ds in nope.json bad.json; do
  echo '[1, 2]' >bad.json
  rc=0
  "$LJ" ablation --np 2 --model tiny --deepspeed "$ds" --out bad_out >f.out 2>f.err || rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || fail "--deepspeed $ds: exit $rc"
  [ "$(grep -c '^error: ' f.err)" -eq 1 ] && grep -q '^hint: ' f.err || { cat f.err >&2; fail "--deepspeed $ds: expected one error line and a hint"; }
  grep -Fq "$ds" f.err || { cat f.err >&2; fail "--deepspeed $ds: the error does not name the file"; }
  grep -q '^ablation: round' f.err && fail "--deepspeed $ds: runs started"
  [ ! -e bad_out ] || fail "--deepspeed $ds: --out was created"
  pass "$(grep '^error: ' f.err)"
done
[ -z "$(ls -A "$TMPDIR")" ] || fail "temporary folders left in TMPDIR: $(ls "$TMPDIR")"

e2e_finish
