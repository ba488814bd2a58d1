#!/usr/bin/env bash
# The dependency direction between the folders of src/, read from the #include lines, checked
# against the module table of docs/architecture.md (its format is described there, under "The
# modules"): a folder may include the folders its row's "may include" column names, and what
# those may include in turn (the script computes the closure).
#   tools/module_deps.sh [DOC [SRC]]   print "folder -> folders it includes" and check them
# DOC is docs/architecture.md and SRC is src/ unless given (tools/module_deps_test.sh gives others).
# Exits 1 and names the line when: a folder of SRC has no row; a row names a folder SRC lacks or
# is not of the form `src/NAME/`; a "may include" name has no row; the table has a cycle; or a
# folder includes one it may not (e.g. plan/ -> train/), with the #include lines that do it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
doc_name=${1:-docs/architecture.md}
doc=$(realpath "${1:-$root/docs/architecture.md}")
src=$(realpath "${2:-$root/src}")
[ -f "$doc" ] || { echo "module_deps: $doc_name: no such file" >&2; exit 1; }
cd "$src"

# The table: the rows after the one header row "| folder | holds | may include |", up to the
# first line that is not a table row. awk prints one record per line, fields split by '|':
#   header|LINE            row|LINE|NAME|DEP DEP ...            error|LINE|MESSAGE
table=$(awk '
  function trim(s) { gsub(/`/, "", s); gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
  /^\|[ \t]*folder[ \t]*\|[ \t]*holds[ \t]*\|[ \t]*may include[ \t]*\|[ \t]*$/ {
    headers++; print "header|" NR; in_table = 1; next
  }
  in_table && /^\|[-: |]+\|[ \t]*$/ { next }
  in_table && /^\|/ {
    n = split($0, cell, "|")
    if (n < 5) { print "error|" NR "|a row needs three cells: folder, holds, may include"; next }
    folder = trim(cell[2]); may = trim(cell[n - 1])
    if (folder !~ /^src\/[a-z_]+\/$/) {
      print "error|" NR "|the folder cell reads \"" folder "\", not `src/NAME/`"; next
    }
    name = substr(folder, 5, length(folder) - 5)
    deps = ""
    if (may != "" && may != "—" && may != "-") {
      k = split(may, item, ",")
      for (i = 1; i <= k; i++) {
        d = trim(item[i])
        if (d !~ /^[a-z_]+$/) {
          print "error|" NR "|\"may include\" of src/" name "/ holds \"" d "\": write folder names separated by commas, or —"
          d = ""
        }
        if (d != "") deps = deps " " d
      }
    }
    print "row|" NR "|" name "|" deps
    next
  }
  in_table { in_table = 0 }
  END { if (headers != 1) print "error|0|" headers + 0 " module tables (header row: folder, holds, may include); want one" }
' "$doc")

status=0
declare -A direct=() row_line=()
header_line=0
while IFS='|' read -r kind line name deps; do
  case $kind in
    header) header_line=$line ;;
    error)
      where=$doc_name:$line
      [ "$line" = 0 ] && where=$doc_name
      echo "$where: module_deps: $name${deps:+|$deps}" >&2
      status=1
      ;;
    row)
      if [ -n "${row_line[$name]+set}" ]; then
        echo "$doc_name:$line: module_deps: a second row for src/$name/ (the first is line ${row_line[$name]})" >&2
        status=1
        continue
      fi
      row_line[$name]=$line
      direct[$name]=$deps
      ;;
  esac
done <<<"$table"
[ "$header_line" != 0 ] || exit 1

# Every row names a folder that exists, and every name it may include has a row.
for d in "${!row_line[@]}"; do
  if [ ! -d "$d" ]; then
    echo "$doc_name:${row_line[$d]}: module_deps: the module table names src/$d/, which does not exist" >&2
    status=1
  fi
  for dep in ${direct[$d]}; do
    if [ -z "${row_line[$dep]+set}" ]; then
      echo "$doc_name:${row_line[$d]}: module_deps: src/$d/ may include \"$dep\", which has no row" >&2
      status=1
    fi
  done
done

# What a folder may include: the closure of the "may include" column. A folder that reaches
# itself is a cycle: the table must only point down.
declare -A allowed=()
for d in "${!row_line[@]}"; do
  declare -A seen=()
  read -ra stack <<<"${direct[$d]}"
  while [ ${#stack[@]} -gt 0 ]; do
    x=${stack[-1]}
    unset 'stack[-1]'
    [ -n "${seen[$x]+set}" ] && continue
    seen[$x]=1
    read -ra more <<<"${direct[$x]:-}"
    stack+=("${more[@]}")
  done
  if [ -n "${seen[$d]+set}" ]; then
    echo "$doc_name:${row_line[$d]}: module_deps: src/$d/ reaches itself through the table (a cycle)" >&2
    status=1
  fi
  allowed[$d]=" ${!seen[*]} "
  unset seen
done

for dir in */; do
  d=${dir%/}
  if [ -z "${row_line[$d]+set}" ]; then
    echo "$doc_name:$header_line: module_deps: the module table has no row for src/$d/; add one" >&2
    status=1
    continue
  fi
  deps=$(grep -rhoE '#include "[a-z_]+/' "$d" | sed -E 's/#include "([a-z_]+)\//\1/' | sort -u |
    grep -vx "$d" | tr '\n' ' ' || true)
  echo "$d -> ${deps:-(nothing)}"
  for dep in $deps; do
    case ${allowed[$d]} in
      *" $dep "*) ;;
      *)
        echo "module_deps: src/$d may not include src/$dep ($doc_name:${row_line[$d]}):" >&2
        grep -rnE "#include \"$dep/" "$d" | head -3 >&2
        status=1
        ;;
    esac
  done
done
exit $status
