# shellcheck shell=bash
# free_port, sourced by scripts/lib/services.sh and scripts/bench.sh.

taken=" "  # ports free_port has handed out in this run

# free_port VAR: sets VAR to a free loopback port not handed out before in this run.
free_port() {
  local used=" " addr p _
  while read -r _ addr _; do
    if [[ $addr == *:* ]]; then used+="$((16#${addr##*:})) "; fi
  done < <(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null)
  while :; do
    p=$((30100 + RANDOM % 2600))  # below the kernel's ephemeral range
    [[ $used$taken == *" $p "* ]] || break
  done
  taken+="$p "
  printf -v "$1" '%s' "$p"
}
