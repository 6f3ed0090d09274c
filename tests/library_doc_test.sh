#!/usr/bin/env bash
# docs/library.md shows its code verbatim: each ```cpp block after a
# "<!-- snippet: PATH -->" line must equal the file PATH (which
# tests/example_package_test.sh builds against the installed package and
# runs, and tests/example_pg_adopter_test.sh those of examples/pg_adopter),
# and every file of both folders is shown; the tables of
# the roles' options match their headers; the packages it lists for the
# build are ones scripts/install_deps.sh installs.
#   bash tests/library_doc_test.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
doc="$root/docs/library.md"
status=0 shown=()
while IFS= read -r path; do
  shown+=("$path")
  block=$(awk -v p="<!-- snippet: $path -->" '
    $0 == p { want = 1; next }
    want == 1 && /^```cpp$/ { want = 2; next }
    want == 2 && /^```$/ { exit }
    want == 2 { print }' "$doc")
  if [[ ! -f $root/$path ]]; then
    echo "FAIL: docs/library.md shows $path, which does not exist"; status=1
  elif [[ "$block" != "$(cat "$root/$path")" ]]; then
    echo "FAIL: docs/library.md's block for $path differs from the file:"
    diff <(printf '%s\n' "$block") "$root/$path" | head -20 || true
    status=1
  fi
done < <(sed -n 's/^<!-- snippet: \(.*\) -->$/\1/p' "$doc")
for f in "$root"/examples/{library_snippets,pg_adopter}/*.{cc,h}; do
  rel=${f#"$root/"}
  [[ $rel == */main.cc ]] && continue  # the harness that runs them, not shown
  [[ " ${shown[*]} " == *" $rel "* ]] || { echo "FAIL: $rel is not shown in docs/library.md"; status=1; }
done
# The tables of the roles' options are the headers' (scripts/gen_role_options.py).
/usr/bin/python3 "$root/scripts/gen_role_options.py" --check "$doc" || status=1
# The build's packages it lists (the code spans of the paragraph after
# "<!-- packages: scripts/install_deps.sh -->") are ones install_deps.sh installs.
installed=$(bash "$root/scripts/install_deps.sh" --list)
listed=$(awk '/^<!-- packages: scripts\/install_deps.sh -->$/ { on = 1; next }
              on && /^$/ { exit }
              on { print }' "$doc" | grep -o '`[^`]*`' | tr -d '`')
[[ -n $listed ]] || { echo "FAIL: docs/library.md lists no packages after <!-- packages: ... -->"; status=1; }
for p in $listed; do
  grep -qxF "$p" <<<"$installed" || {
    echo "FAIL: docs/library.md lists the package $p, which scripts/install_deps.sh does not install"
    status=1
  }
done
# The public headers it lists (after "<!-- public headers: ... -->"; a bare
# name is in the folder of the path before it) are the installed headers
# outside internal/ folders, no more, no fewer.
listed_headers=$(awk '/<!-- public headers: tests\/library_doc_test.sh -->/ { on = 1; next }
                      on && (/^- \*\*/ || /^$/) { exit }
                      on { print }' "$doc" | grep -o '`[^`]*\.h`' | tr -d '`' |
  awk '/^shared\// { dir = $0; sub(/\/[^\/]*$/, "", dir); print; next } { print dir "/" $0 }' | sort)
public_headers=$(cd "$root" && find shared/amqp shared/base shared/observability shared/outbox \
  shared/postgres shared/roles shared/runtime shared/sqlite -name '*.h' -not -path '*/internal/*' | sort)
if [[ "$listed_headers" != "$public_headers" ]]; then
  echo "FAIL: docs/library.md's public headers differ from those outside internal/ (< listed, > in the tree):"
  diff <(printf '%s\n' "$listed_headers") <(printf '%s\n' "$public_headers") || true
  status=1
fi
# The code lines it gives for the snippets (no comments, blanks or includes).
code_lines() { cat "$@" | grep -vE '^\s*(//.*)?$' | grep -vcE '^\s*#include'; }
snippets=$root/examples/library_snippets
trio=$(code_lines "$snippets"/{producer.cc,consumer.cc,shipping.h,snippets.h})
own=$(code_lines "$snippets/recovery.cc")
tr '\n' ' ' <"$doc" | grep -qE "consumer, with their schemas and the options block they share, is $trio code lines.* adds $own " ||
  { echo "FAIL: docs/library.md should say the snippets are $trio code lines, and recovery.cc adds $own"; status=1; }
((status == 0)) && echo "docs/library.md shows ${#shown[@]} files, each as it is, $(wc -l <<<"$public_headers") public headers, and $(wc -w <<<"$listed") packages install_deps.sh installs"
exit $status
