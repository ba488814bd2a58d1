#!/usr/bin/env bash
# The dependency direction between the folders of src/, read from the #include lines, checked
# against DESIGN.md's module table: each folder may include only the folders listed for it.
#   tools/module_deps.sh          print "folder -> folders it includes" and check them
# Exits 1 and names the include when a folder reaches one it may not (e.g. plan/ -> train/).
set -euo pipefail
cd "$(dirname "$0")/../src"

# folder: the folders it may include (transitive closure written out; itself is always allowed).
declare -A allowed=(
  [core]=""
  [graph]="core"
  [codegen]="core graph"
  [passes]="core graph codegen models"
  [backends]="core graph codegen"
  [runtime]="core graph codegen backends passes"
  [dist]="core graph codegen backends passes runtime"
  [models]="core graph"
  [io]="core"
  [tokenize]="core io"
  [train]="core graph codegen backends passes runtime dist models io"
  [plan]="core graph codegen backends passes runtime dist models io"
  [cli]="core graph codegen backends passes runtime dist models io train plan tokenize"
)

status=0
for dir in */; do
  d=${dir%/}
  if [ -z "${allowed[$d]+set}" ]; then
    echo "module_deps: src/$d is not in the table; add it (and to DESIGN.md's module table)" >&2
    status=1
    continue
  fi
  deps=$(grep -rhoE '#include "[a-z_]+/' "$d" | sed -E 's/#include "([a-z_]+)\//\1/' | sort -u |
    grep -vx "$d" | tr '\n' ' ' || true)
  echo "$d -> ${deps:-(nothing)}"
  for dep in $deps; do
    case " ${allowed[$d]} " in
      *" $dep "*) ;;
      *)
        echo "module_deps: src/$d may not include src/$dep:" >&2
        grep -rnE "#include \"$dep/" "$d" | head -3 >&2
        status=1
        ;;
    esac
  done
done
exit $status
