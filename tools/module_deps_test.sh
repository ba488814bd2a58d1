#!/usr/bin/env bash
# tools/module_deps.sh can fail: run it against copies of docs/architecture.md with one thing
# wrong in the module table and expect exit 1 with the message naming the line. The real doc
# must pass. (ctest lint.module_deps_fails)
# shellcheck disable=SC2016  # the backticks in the patterns are markdown's, not expansions
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=$root/tools/module_deps.sh
doc=$root/docs/architecture.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect_failure NAME EXPECTED-TEXT...: module_deps.sh on $tmp/doc.md exits 1 and its stderr
# holds every EXPECTED-TEXT.
expect_failure() {
  local name=$1 rc=0
  shift
  bash "$check" "$tmp/doc.md" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$rc" != 1 ]; then
    echo "FAIL $name: exit $rc, want 1; stderr:" >&2
    cat "$tmp/err" >&2
    failures=$((failures + 1))
    return
  fi
  local want
  for want in "$@"; do
    if ! grep -qF -- "$want" "$tmp/err"; then
      echo "FAIL $name: stderr lacks '$want'; it was:" >&2
      cat "$tmp/err" >&2
      failures=$((failures + 1))
      return
    fi
  done
  echo "ok   $name"
}

# The line of the row of src/NAME/ in $tmp/doc.md.
row_line() { grep -n "^| \`src/$1/\` |" "$tmp/doc.md" | cut -d: -f1; }
header_line() { grep -n '^| folder | holds | may include |' "$tmp/doc.md" | cut -d: -f1; }

# The real doc passes.
if bash "$check" "$doc" >"$tmp/out" 2>"$tmp/err"; then
  echo "ok   the doc's table allows every include"
else
  echo "FAIL the doc's table: module_deps.sh fails on it:" >&2
  cat "$tmp/err" >&2
  failures=$((failures + 1))
fi
grep -q "^tokenize -> core io $" "$tmp/out" || {
  echo "FAIL the output lacks 'tokenize -> core io'" >&2
  failures=$((failures + 1))
}

# An allowed edge removed: tokenize/ may include core only, but token_writer.h includes io/.
sed -E 's#^(\| `src/tokenize/` \|.*\| )io \|$#\1core |#' "$doc" >"$tmp/doc.md"
expect_failure "edge tokenize -> io removed" \
  "module_deps: src/tokenize may not include src/io ($tmp/doc.md:$(row_line tokenize))" \
  "$(cd "$root/src" && grep -rnE '#include "io/' tokenize | head -1)"

# A folder of src/ without a row.
grep -v '^| `src/tokenize/` |' "$doc" >"$tmp/doc.md"
expect_failure "row of tokenize/ missing" \
  "$tmp/doc.md:$(header_line): module_deps: the module table has no row for src/tokenize/"

# A row for a folder that does not exist.
sed -E 's#^(\| `src/cli/` \|.*)$#\1\n| `src/nowhere/` | nothing | core |#' "$doc" >"$tmp/doc.md"
expect_failure "row of a folder that does not exist" \
  "$tmp/doc.md:$(row_line nowhere): module_deps: the module table names src/nowhere/, which does not exist"

# A name in "may include" that has no row.
sed -E 's#^(\| `src/io/` \|.*\| )core \|$#\1core, nowhere |#' "$doc" >"$tmp/doc.md"
expect_failure "may include a folder without a row" \
  "$tmp/doc.md:$(row_line io): module_deps: src/io/ may include \"nowhere\", which has no row"

# A cycle: core may include cli, which reaches core.
sed -E 's#^(\| `src/core/` \|.*\| )— \|$#\1cli |#' "$doc" >"$tmp/doc.md"
expect_failure "cycle through core" \
  "$tmp/doc.md:$(row_line core): module_deps: src/core/ reaches itself through the table (a cycle)"

# Prose in the machine-read column.
sed -E 's#^(\| `src/plan/` \|.*\| )passes, #\1passes (pipeline), #' "$doc" >"$tmp/doc.md"
expect_failure "prose in may include" \
  "$tmp/doc.md:$(row_line plan): module_deps: \"may include\" of src/plan/ holds \"passes (pipeline)\""

# No module table at all.
grep -v '^| folder | holds | may include |' "$doc" >"$tmp/doc.md"
expect_failure "no module table" "0 module tables"

if [ "$failures" -gt 0 ]; then
  echo "module_deps_test: $failures failed" >&2
  exit 1
fi
echo "module_deps_test: every broken table fails, the real one passes"
