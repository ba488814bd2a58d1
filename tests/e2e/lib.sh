# Shared helpers for the tier-4 tests (tests/e2e/*_test.sh): the CLI as a user runs it.
# Sourced, never run. Each test is run as `bash <script> <path-to-ljperf> <repo-root>`.
# Needs only bash, coreutils and perl (no Python): token files and configs are made here.
#
# After `e2e_init "$@"`:
#   LJ    the ljperf binary (absolute path)
#   ROOT  the repository root (for files of the repository, e.g. examples/)
#   TMP   a fresh temporary folder, removed when the script exits
# Checks print one line each; the first failure exits non-zero with "FAIL: ...". A product bug
# that a check exposes is reported with known_bug (printed as "KNOWN BUG: ...", the script goes
# on and fails at e2e_finish), so one bug does not hide the checks after it.

set -euo pipefail
# Default logging, whatever the caller's environment says: the tests check exact stderr lines.
unset LJ_LOG

E2E_KNOWN_BUGS=0
E2E_T0=$(date +%s%N)

e2e_init() {
  if [ $# -lt 2 ]; then
    echo "usage: bash $0 <path-to-ljperf> <repo-root>" >&2
    exit 2
  fi
  LJ=$(readlink -f "$1")
  ROOT=$(readlink -f "$2")
  export ROOT
  [ -x "$LJ" ] || { echo "FAIL: $LJ is not an executable" >&2; exit 2; }
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/ljperf-e2e.XXXXXX")
  trap 'e2e_cleanup' EXIT
  cd "$TMP"
  echo "== $(basename "$0") (binary $LJ, temp $TMP)"
}

# Kills the background run this script started and has not yet waited for (E2E_BG_PID: set
# it after starting one, clear it after `wait`, so a reused pid is never hit), removes the temp
# folder.
E2E_BG_PID=""
e2e_cleanup() {
  if [ -n "$E2E_BG_PID" ]; then kill -9 "$E2E_BG_PID" 2>/dev/null || true; fi
  cd /
  if [ -n "${TMP:-}" ]; then rm -rf "$TMP"; fi
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
pass() { echo "  ok: $*"; }
note() { echo "  note: $*"; }
known_bug() {
  echo "KNOWN BUG: $*" >&2
  E2E_KNOWN_BUGS=$((E2E_KNOWN_BUGS + 1))
}

e2e_finish() {
  local secs=$((($(date +%s%N) - E2E_T0) / 1000000))
  if [ "$E2E_KNOWN_BUGS" -gt 0 ]; then
    echo "FAIL: $(basename "$0"): $E2E_KNOWN_BUGS known product bug(s), see KNOWN BUG lines ($((secs / 1000)).$((secs % 1000 / 100)) s)" >&2
    exit 1
  fi
  echo "PASS: $(basename "$0") ($((secs / 1000)).$((secs % 1000 / 100)) s)"
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# How much slower than on an idle host a multi-threaded run may be now: 2 x the 1-minute load
# average per core, rounded up, at least 1. Time limits meant for an idle host are scaled by it.
# Why 2x: OpenMP teams degrade worse than in proportion when other processes share the cores
# (the default benchmark: steps of ~1.8 s on a quiet moment, so ~22 s for its 12 steps; it took
# 64-90 s at load 3.5-4.9).
load_factor() {
  local load cores
  load=$(cut -d' ' -f1 /proc/loadavg)
  cores=$(nproc)
  perl -e 'my $f = 2 * $ARGV[0] / $ARGV[1]; my $i = int($f); $i++ if $f > $i; print $i < 1 ? 1 : $i' "$load" "$cores"
}

# make_llmc_tokens FILE N VOCAB: an llm.c GPT-2 shard (magic 20240520, version 1, uint16) of N
# pseudo-random tokens below VOCAB, the same bytes every time.
make_llmc_tokens() {
  perl -e '
    my ($n, $vocab) = @ARGV;
    print pack("l<256", 20240520, 1, $n, (0) x 253);
    my $x = 12345; my @t;
    for (1 .. $n) { $x = ($x * 1103515245 + 12345) % 2147483648; push @t, ($x >> 8) % $vocab; }
    print pack("S<*", @t);' "$2" "$3" >"$1"
}

# make_llama_config FILE VOCAB HIDDEN LAYERS HEADS KV_HEADS FFN MAX_POS: an HF config.json.
make_llama_config() {
  cat >"$1" <<EOF
{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "vocab_size": $2,
  "hidden_size": $3,
  "num_hidden_layers": $4,
  "num_attention_heads": $5,
  "num_key_value_heads": $6,
  "intermediate_size": $7,
  "max_position_embeddings": $8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "hidden_act": "silu",
  "tie_word_embeddings": false
}
EOF
}

# snapshot PATH: one line per file and folder under PATH (a folder or a file) with its content
# hash, sorted; two equal snapshots mean PATH was not touched ("" when PATH does not exist).
snapshot() {
  [ -e "$1" ] || return 0
  if [ ! -d "$1" ]; then
    echo "$1 $(md5sum <"$1" | cut -d' ' -f1)"
    return 0
  fi
  (cd "$1" && find . -print0 | sort -z | while IFS= read -r -d '' f; do
    if [ -f "$f" ]; then echo "$f $(md5sum <"$f" | cut -d' ' -f1)"; else echo "$f"; fi
  done)
}

# json_count FILE: checks that every line of FILE is one JSON object (fails otherwise) and
# prints the number of lines.
json_count() {
  perl -MJSON::PP -ne '
    my $j = eval { JSON::PP->new->decode($_) };
    die "line $.: not a JSON object: $@\n" unless ref $j eq "HASH";
    END { print $. // 0, "\n" }' "$1" || fail "$1 holds a line that is not a JSON object"
}

# json_get FILE LINE PATH: the value at PATH (dot-separated keys) in line LINE (1-based) of a
# JSONL file; "MISSING" when absent, "null" for null.
json_get() {
  perl -MJSON::PP -e '
    my ($file, $line, $path) = @ARGV;
    open my $f, "<", $file or die "$file: $!\n";
    my $text; while (<$f>) { $text = $_ if $. == $line }
    my $v = JSON::PP->new->allow_nonref->decode($text);
    for my $k (split /\./, $path) {
      if (ref $v ne "HASH" || !exists $v->{$k}) { print "MISSING\n"; exit 0 }
      $v = $v->{$k};
    }
    print defined $v ? (ref $v ? JSON::PP->new->canonical->encode($v) : $v) : "null", "\n";' "$@"
}

# Multi-process tests: exits 0 with "SKIP: ..." (CTest: skipped) without mpirun on PATH or when
# this ljperf was built without MPI; otherwise sets MPIRUN=(mpirun and its flags: Open MPI runs
# as root in containers, and with more ranks than free cores on a shared host) and one OpenMP
# thread per rank, so the ranks do not fight over the cores. Usage: "${MPIRUN[@]}" -np 2 "$LJ" ...
mpi_e2e_init() {
  if ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIP: no mpirun on PATH (install openmpi-bin)"
    exit 0
  fi
  local built
  built=$("$LJ" doctor --json | perl -MJSON::PP -e 'my $j = decode_json(join "", <STDIN>); print $j->{facts}{mpi}{built_with_mpi} ? 1 : 0')
  if [ "$built" != 1 ]; then
    echo "SKIP: this ljperf was built without MPI"
    exit 0
  fi
  MPIRUN=(mpirun)
  if mpirun --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
    MPIRUN+=(--allow-run-as-root --oversubscribe)
  fi
  export OMP_NUM_THREADS=1
}
