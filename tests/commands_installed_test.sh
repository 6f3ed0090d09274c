#!/usr/bin/env bash
# Every external command our scripts run comes from a package the scripts
# install. A fresh Debian 12 or 13 has only its "required" packages; a command
# found on a developer's machine through some other package (curl, say) would
# fail there. For each command word of scripts/**.sh, tests/*.sh and .ci/run
# that resolves to a file here, the owning Debian package must be of
# priority required, or one scripts/install_deps.sh installs on this
# release (its --list), or installed by the script itself (named on one of
# its lines that installs packages).
# A command outside any package (/usr/local, ~/.pyenv) fails too.
#   bash tests/commands_installed_test.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v dpkg-query >/dev/null || { echo "FAIL: needs dpkg (Debian)" >&2; exit 1; }

# The packages scripts/install_deps.sh installs on this release.
deps=" $(bash scripts/install_deps.sh --list | tr '\n' ' ') "
[[ $deps == *" cmake "* ]] || { echo "FAIL: scripts/install_deps.sh --list names no packages" >&2; exit 1; }

# Command words: the first word of each simple command, after comments,
# heredoc bodies, quoted strings, assignments and wrappers are set aside.
words_of() {
  awk '
    heredoc != "" { if ($0 ~ "^[ \t]*" heredoc "[ \t]*$") heredoc = ""; next }
    {
      line = $0
      if (match(line, /<<-?[ \t]*[\047"]?[A-Za-z_]+[\047"]?/)) {
        tag = substr(line, RSTART, RLENGTH); gsub(/<<-?[ \t]*|[\047"]/, "", tag); heredoc = tag
      }
      gsub(/\047[^\047]*\047/, "\047\047", line)      # single-quoted text
      gsub(/"([^"\\]|\\.)*"/, "\"\"", line)           # double-quoted text
      sub(/(^|[ \t])#.*/, "", line)                    # comments
      gsub(/\$\(\(/, " ", line)                        # arithmetic
      gsub(/\|\||&&|[|;&(){}`]|\$\(/, "\n", line)
      n = split(line, parts, "\n")
      for (i = 1; i <= n; i++) {
        m = split(parts[i], w, /[ \t]+/)
        for (j = 1; j <= m; j++) {
          if (w[j] == "" || w[j] ~ /^[A-Za-z_][A-Za-z0-9_]*=/) continue
          if (w[j] ~ /^(!|then|do|else|elif|if|while|until|time|exec|command|sudo|nohup|xargs|env|-[A-Za-z-]+)$/) continue
          if (w[j] ~ /^(timeout|nice|setsid)$/) { skip_num = 1; continue }
          if (skip_num && w[j] ~ /^[0-9.]+[smhd]?$/) { skip_num = 0; continue }
          skip_num = 0
          if (w[j] ~ /^[a-z][a-z0-9._+-]*$/) print w[j]
          break
        }
      }
    }' "$1" | sort -u
}

# package_cache[COMMAND]: package_of's answer, asked once per command.
declare -A package_cache=()
package_of() {  # the Debian package that owns command $1, "" if none
  local path p
  path=$(command -v "$1") || return 0
  for p in "$path" "$(readlink -f "$path")" "${path/#\/usr\/bin\//\/bin\/}" "${path/#\/usr\/sbin\//\/sbin\/}"; do
    p=$(dpkg-query -S "$p" 2>/dev/null | grep -v '^diversion' | head -1 | cut -d: -f1)
    [[ -n $p ]] && { echo "$p"; return 0; }
  done
  echo "?"
}

# Commands the machine may have from elsewhere, and the package a fresh one
# gets them from.
declare -A provided_by=(
  [docker]="docker.io (../shared/docker/local-images.sh, run first by the compose scripts)"
)

builtins=" $(compgen -b | tr '\n' ' ') $(compgen -k | tr '\n' ' ') "
failures=()
checked=0
shopt -s nullglob
for script in scripts/*.sh scripts/lib/*.sh tests/*.sh .ci/run; do
  functions=" $(grep -oE '^[[:space:]]*[a-z_][a-z0-9_]*\(\)' "$script" scripts/lib/*.sh | sed -E 's/.*:[[:space:]]*//; s/\(\)//' | tr '\n' ' ') "
  while read -r word; do
    [[ -z $word || $builtins == *" $word "* || $functions == *" $word "* ]] && continue
    [[ $(type -t "$word" 2>/dev/null) == file ]] || continue
    checked=$((checked + 1))
    [[ -n ${package_cache[$word]+set} ]] || package_cache[$word]=$(package_of "$word")
    pkg=${package_cache[$word]}
    [[ -z $pkg ]] && continue
    [[ -n ${provided_by[$word]:-} ]] && continue
    if [[ $pkg == "?" ]]; then
      failures+=("$script: $word ($(command -v "$word")) is not from a Debian package")
      continue
    fi
    [[ $deps == *" $pkg "* ]] && continue
    [[ $(dpkg-query -W -f='${Priority}' "$pkg" 2>/dev/null) == required ]] && continue
    grep -E '(apt-get install|missing\+=|PACKAGES)' "$script" | grep -qw -- "$pkg" && continue
    failures+=("$script: $word comes from $pkg, which no script installs (scripts/install_deps.sh)")
  done < <(words_of "$script")
done

if ((${#failures[@]})); then
  printf 'FAIL: %s\n' "${failures[@]}" >&2
  exit 1
fi
echo "PASS: $checked command uses, each from a required package or one the scripts install"
