# --device auto|cpu|cuda as a user meets it: a device that is no device, and cuda where it cannot
# run (a build without CUDA, a host without a GPU; benchmark and train alike), each exit non-zero with one
# "error:" line and one "hint:" line; auto and cpu train on the CPU here; the doctor's GPU section
# says which CUDA backend this binary has. On a host with an NVIDIA GPU the cuda checks are
# tools/gpu_check.sh's business and are skipped here.
# Usage: bash device_test.sh <path-to-ljperf> <repo-root>
source "$(dirname "$0")/lib.sh"
e2e_init "$@"

# one_line_error NAME PATTERN COMMAND...: exits non-zero, stderr is "error: ..." matching PATTERN
# then one "hint: ..." line, nothing else.
one_line_error() {
  local name=$1 pattern=$2
  shift 2
  if "$@" >out.txt 2>err.txt; then fail "$name: exited 0"; fi
  [ "$(wc -l <err.txt)" -eq 2 ] || fail "$name: stderr is not two lines: $(cat err.txt)"
  grep -q "^error: .*$pattern" err.txt || fail "$name: $(head -n 1 err.txt)"
  grep -q "^hint: " err.txt || fail "$name: no hint: $(cat err.txt)"
  pass "$name: $(head -n 1 err.txt)"
}

small=(--model tiny --batch-size 2 --seq-len 32 --steps 2 --threads 2)
one_line_error "no such device" "--device tpu is not a device" "$LJ" benchmark --device tpu "${small[@]}"
# Into a file first: grep -q stops reading at the match, and under pipefail the help's SIGPIPE
# would fail the pipeline.
"$LJ" benchmark --help >bh.txt && grep -q -- "--device" bh.txt || fail "benchmark --help does not list --device"
"$LJ" train --help >th.txt && grep -q -- "--device" th.txt || fail "train --help does not list --device"
pass "--help lists --device"

"$LJ" doctor >doctor.txt 2>&1 || true
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: an NVIDIA GPU is visible; tools/gpu_check.sh checks --device cuda on it"
  exit 0
fi
make_llmc_tokens tok.bin 5000 256
train=(--model tiny --data tok.bin --out "$TMP/run" --steps 1 --threads 2)
if grep -q "CUDA backend: built" doctor.txt; then
  why="--device cuda: no GPU here"
  one_line_error "cuda without a GPU" "$why" "$LJ" benchmark --device cuda "${small[@]}"
  grep -q "CUDA runtime .*no NVIDIA driver and no GPU" doctor.txt ||
    fail "doctor does not say there is no driver: $(sed -n '/^GPU/,/^$/p' doctor.txt)"
  pass "doctor: the CUDA runtime finds no driver and no GPU"
else
  grep -q "CUDA backend: not built into this ljperf" doctor.txt ||
    fail "doctor has no CUDA backend line: $(sed -n '/^GPU/,/^$/p' doctor.txt)"
  why="--device cuda: this ljperf was built without CUDA"
  one_line_error "cuda in a build without it" "$why" "$LJ" benchmark --device cuda "${small[@]}"
fi
# train takes the same --device and says the same, before it touches --out.
one_line_error "train on cuda" "$why" "$LJ" train --device cuda "${train[@]}"
[ ! -e "$TMP/run" ] || fail "train --device cuda left $TMP/run behind"
one_line_error "train on cuda, bf16, compiled" "$why" \
  "$LJ" train --device cuda --precision bf16 --compile "${train[@]}"
[ ! -e "$TMP/run" ] || fail "train --device cuda --precision bf16 left $TMP/run behind"

"$LJ" benchmark --device auto "${small[@]}" >auto.txt 2>&1 || fail "--device auto: $(tail -3 auto.txt)"
"$LJ" benchmark --device cpu "${small[@]}" >cpu.txt 2>&1 || fail "--device cpu: $(tail -3 cpu.txt)"
pass "--device auto and cpu benchmark on the CPU"
e2e_finish
