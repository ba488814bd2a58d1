#!/usr/bin/env bash
# Predicted against published tokens/s/GPU on every row of rows.tsv, fit and validation apart.
# Usage: bench/plan/published/check.sh [path/to/ljperf] [--max-validation-median X] [--markdown]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ljperf="${1:-$here/../../../build/ljperf}"
shift || true
exec perl "$here/check.pl" "$ljperf" "$@"
