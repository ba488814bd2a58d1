#!/usr/bin/env bash
# A collective that one rank never joins must end the whole job, not hang it:
#   timeout_test.sh MAX_SECONDS -- mpirun ... dist_tests --comm-timeout=2 --gtest_filter=...
# Passes when the command exits non-zero within MAX_SECONDS and prints the timeout line, naming
# the collective LJ_TIMEOUT_OP (all_reduce unless set; all_to_all for expert parallelism's; any:
# no line required, for a peer killed outright, which the launcher may end first).
set -u
op=${LJ_TIMEOUT_OP:-all_reduce}
max_s=$1
shift 2
start_ms=$(($(date +%s%N) / 1000000))
out=$("$@" 2>&1)
rc=$?
elapsed_ms=$(($(date +%s%N) / 1000000 - start_ms))
elapsed="$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))"
echo "$out" | tail -n 20
echo "exit code $rc after ${elapsed} s"
if [ "$rc" -eq 0 ]; then
  echo "FAIL: the job exited 0; a hang must end it non-zero"
  exit 1
fi
if [ "$op" != any ] && ! echo "$out" | grep -qE "rank [0-9]+: $op did not complete within [0-9.]+ s"; then
  echo "FAIL: no timeout line naming the rank and the operation"
  exit 1
fi
if [ "$elapsed_ms" -gt $((max_s * 1000)) ]; then
  echo "FAIL: took ${elapsed} s, more than ${max_s} s"
  exit 1
fi
echo "PASS"
