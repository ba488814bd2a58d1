# dist_kill_test.sh at ZeRO 3 (each rank holds only its shard of the parameters; the checkpoint
# gathers them to rank 0): rank 0, which writes the model and the manifest, is the one killed
# with SIGKILL mid-step, stopped with SIGTERM and frozen with SIGSTOP; rank 1 is killed inside the
# checkpoint write. The same checks: every rank ends non-zero within --comm-timeout, nothing
# committed is damaged, and rerunning the same command resumes bitwise.
# Usage: bash dist_kill_zero3_test.sh <path-to-ljperf> <repo-root>
kZero=3 kVictim=0 kCkptVictim=1
source "$(dirname "$0")/dist_kill_test.sh"
