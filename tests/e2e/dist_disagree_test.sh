# Ranks that disagree are refused at start, before any step (issue 11, faults): `mpirun` with two
# application contexts (`-np 1 ljperf A : -np 1 ljperf B`) starts rank 0 and rank 1 with commands
# that differ in one thing: the sequence length, the model, the data file, the data's content at
# the same path (each rank in its own working folder, as on two hosts), the ZeRO stage, the
# precision, the learning rate. Each case: the job exits non-zero within the limit (no hang),
# each rank prints one error line naming rank 1 and what differs, no step runs, and `train`
# leaves no output folder behind. `benchmark` likewise for the sequence length and the model.
# Skips (exit 0, "SKIP: ...") without mpirun or an MPI build (lib.sh mpi_e2e_init).
# Usage: bash dist_disagree_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

mpi_e2e_init
readonly kLimit=60  # seconds; observed ~2 s a case

make_llama_config other.json 256 64 2 4 2 128 128  # another model than the tiny preset
mkdir a b
make_llmc_tokens tok.bin 20000 256
make_llmc_tokens a/same.bin 20000 256
make_llmc_tokens b/same.bin 20000 200  # the same size, other tokens
cmp -s a/same.bin b/same.bin && fail "a/same.bin and b/same.bin are equal: not a test"
[ "$(stat -c %s a/same.bin)" = "$(stat -c %s b/same.bin)" ] || fail "the two same.bin differ in size"

# disagree NAME FIELD CMD_RANK0 -- CMD_RANK1: both commands get --out $TMP/NAME (train), and the
# job must end non-zero with each rank's line "rank K: error: rank 1 disagrees with rank 0 on
# FIELD (...)".
disagree() {
  local name=$1 field=$2
  shift 2
  local a=() b=()
  while [ "$1" != -- ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  local t0 rc took
  t0=$(now_ms)
  set +e
  timeout "$kLimit" "${MPIRUN[@]}" -np 1 "${a[@]}" : -np 1 "${b[@]}" >"$name.out" 2>"$name.err"
  rc=$?
  set -e
  took=$(($(now_ms) - t0))
  [ "$rc" -ne 124 ] || fail "$name: still running after $kLimit s"
  [ "$rc" -ne 0 ] || fail "$name: the job exited 0"
  for r in 0 1; do
    local n
    n=$(grep -c "^rank $r: error: " "$name.err" || true)
    [ "$n" = 1 ] || { cat "$name.err" >&2; fail "$name: rank $r printed $n error lines (expected one)"; }
    grep -q "^rank $r: error: rank 1 disagrees with rank 0 on $field (rank $r has " "$name.err" ||
      { cat "$name.err" >&2; fail "$name: rank $r's error does not name rank 1 and '$field'"; }
  done
  ! grep -qE "^step: " "$name.out" "$name.err" || fail "$name: a step ran"
  [ ! -e "$TMP/$name" ] || fail "$name: $TMP/$name was created"
  pass "$name: exit $rc after $took ms; $(grep '^rank 1: error: ' "$name.err")"
}

tr=(train --steps 3 --batch-size 2 --threads 1 --log-every 1)
echo "check: train, ranks that differ in one setting, refused before any step"
disagree seq "sequence length" \
  "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 32 --out "$TMP/seq" -- \
  "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 64 --out "$TMP/seq"
disagree model "model config" \
  "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 32 --out "$TMP/model" -- \
  "$LJ" "${tr[@]}" --model "$TMP/other.json" --data tok.bin --seq-len 32 --out "$TMP/model"
disagree data "training data" \
  "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 32 --out "$TMP/data" -- \
  "$LJ" "${tr[@]}" --model tiny --data "$TMP/a/same.bin" --seq-len 32 --out "$TMP/data"
# The same relative path, another file: rank 0 runs in a/, rank 1 in b/ (mpirun's -wdir).
disagree content "training data content" \
  -wdir "$TMP/a" "$LJ" "${tr[@]}" --model tiny --data same.bin --seq-len 32 --out "$TMP/content" -- \
  -wdir "$TMP/b" "$LJ" "${tr[@]}" --model tiny --data same.bin --seq-len 32 --out "$TMP/content"
disagree zero "ZeRO stage" \
  "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 32 --zero 1 --out "$TMP/zero" -- \
  "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 32 --zero 2 --out "$TMP/zero"
disagree precision "precision" \
  "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 32 --precision fp16 --out "$TMP/precision" -- \
  "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 32 --precision f32 --out "$TMP/precision"
disagree lr "learning rate at steps 0, n/2, n-1" \
  "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 32 --lr 1e-3 --out "$TMP/lr" -- \
  "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 32 --lr 2e-3 --out "$TMP/lr"

echo "check: benchmark, ranks that differ, refused before any step"
bm=(benchmark --steps 3 --batch-size 2 --threads 1)
disagree bench_seq "sequence length" \
  "$LJ" "${bm[@]}" --model tiny --seq-len 32 -- "$LJ" "${bm[@]}" --model tiny --seq-len 64
disagree bench_model "model config" \
  "$LJ" "${bm[@]}" --model tiny --seq-len 32 -- "$LJ" "${bm[@]}" --model "$TMP/other.json" --seq-len 32

echo "check: the same command on both contexts runs (the refusals above are not the launch form's)"
"${MPIRUN[@]}" -np 1 "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 32 --out "$TMP/same" : \
  -np 1 "$LJ" "${tr[@]}" --model tiny --data tok.bin --seq-len 32 --out "$TMP/same" >same.out 2>same.err ||
  { tail -5 same.err >&2; fail "the same command in two contexts failed"; }
[ "$(grep -c '^step: ' same.err)" = 3 ] || fail "the agreeing run did not print 3 steps"
pass "two contexts with one command trained 3 steps"
e2e_finish
