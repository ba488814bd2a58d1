#!/usr/bin/env bash
# JSON from outside the process is read only through core/json_read.h (issue 33): nlohmann-json's
# own readers throw on a wrong type or a missing key, and an escaped exception aborts ljperf.
#   tools/json_lint.sh            list the JSON reads outside core/json_read.*; exit 1 if any
# The rule, on the C++ files of src/ that see nlohmann-json (they include <nlohmann/json.hpp>, or
# a header of src/ that does), but not core/json_read.h and core/json_read.cc:
#   - no `.value(<args>)` (nor `->value(`)  nlohmann's value(key, default) throws when the key has another type
#                              (a `.value()` without arguments, StatusOr's or an iterator's, is fine)
#   - no `.get<`, `template get<`, `get_to(`, `get_ref<`   throw on another type
#   - no `.at(`                throws on a missing key or index
# Writing JSON (j["key"] = x, json{{...}}, push_back, dump) is not a read and is not flagged, nor
# is checking a type (is_string(), contains()). Text after `//` is ignored. The lines the rule
# would flag but that read no outside JSON are listed in `exempt` below (file, the line's text,
# why): a std::map's .at(), or a JSON object the same function has just built.
set -euo pipefail
cd "$(dirname "$0")/../src"

allowed='^core/json_read\.(h|cc)$'
# Headers of src/ that bring nlohmann-json in, and the files that include them or it.
direct=$(grep -rlE '#include <nlohmann/json(_fwd)?\.hpp>' --include='*.h' --include='*.cc' . |
  sed 's|^\./||' | sort)
headers=$(echo "$direct" | grep -E '\.h$' | tr '\n' '|' | sed 's/|$//; s/\./\\./g')
files=$(
  {
    echo "$direct"
    [ -n "$headers" ] && grep -rlE "#include \"($headers)\"" --include='*.h' --include='*.cc' . |
      sed 's|^\./||'
  } | sort -u | grep -vE "$allowed" || true
)

# file|fixed text of the line|why
exempt=(
  'cli/doctor.cc|counts.at(CheckLevel::|a std::map of the check levels, not JSON'
  'cli/benchmark_report.cc|rows[c] = rows.value(c, 0.0)|sums into the object built two lines above'
)

pattern='(\.|->)value\([[:space:]]*[^)[:space:]]|(\.|->)get<|template[[:space:]]+get<|get_to\(|get_ref<|(\.|->)at\('
found=0
for f in $files; do
  # Drop comments (from `//` on), match, then drop the exempt lines.
  hits=$(awk -v f="$f" '{ line = $0; sub(/\/\/.*/, "", line); print f ":" NR ": " line }' "$f" |
    grep -E "^[^:]+:[0-9]+: .*($pattern)" || true)
  for e in "${exempt[@]}"; do
    IFS='|' read -r ef etext _ <<<"$e"
    [ "$ef" = "$f" ] && hits=$(echo "$hits" | grep -vF -- "$etext" || true)
  done
  if [ -n "$hits" ]; then
    echo "$hits"
    found=$((found + $(echo "$hits" | wc -l)))
  fi
done
echo "json_lint: $(echo "$files" | grep -c . || true) files see nlohmann-json; $found reads outside core/json_read.*"
if [ "$found" -gt 0 ]; then
  echo "json_lint: read JSON with core/json_read.h (json_read, json_read_or, json_read_in, the *_if peeks)" >&2
  exit 1
fi
