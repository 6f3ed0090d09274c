#!/usr/bin/env bash
# The tests against RabbitMQ 4.0 on a Debian 12 host, whose own package is
# RabbitMQ 3.10.8. Debian 13's RabbitMQ 4.0.5 (with its Erlang 27) is
# installed once into a root file system of its own, and the private test
# nodes run it (scripts/lib/rabbitmq_root_bin: that release's /usr over the
# host's, in a mount namespace of its own); the services and tests stay the
# host's build. No Docker, and nothing of the host's own packages changes.
#
#   rabbitmq40.sh setup          build the root file system once (debootstrap
#                                from the host's Debian mirror; a few minutes)
#   rabbitmq40.sh test [ARGS]    ctest ARGS (default: the e2e label) against
#                                RabbitMQ 4.0; the build must exist (scripts/build.sh)
#   rabbitmq40.sh run CMD...     CMD with every private node on RabbitMQ 4.0
#                                (e.g. scripts/netlab.sh, scripts/bench.sh)
#
# On a host whose own RabbitMQ is 4.x already (Debian 13), setup does
# nothing and test and run use the host's.
# Env: OUTBOX_RABBITMQ_ROOT, the root file system (default
# /var/cache/outbox/rabbitmq-4.0); BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${OUTBOX_RABBITMQ_ROOT:-/var/cache/outbox/rabbitmq-4.0}
SUITE=trixie

die() { echo "rabbitmq40: $*" >&2; exit 1; }
say() { echo "rabbitmq40: $*" >&2; }

host_version() { dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null || true; }
host_has_4() { [[ $(host_version) == 4.* ]]; }
root_version() { chroot "$ROOT" dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null || true; }

# The first Debian mirror the host's apt knows (apt-get update has run:
# scripts/install_deps.sh); the same archive serves Debian 13.
mirror() {
  apt-cache policy | awk '$3 ~ /^[a-z]+\/main$/ && $2 ~ /^https?:/ && $2 !~ /security/ { print $2; exit }'
}

setup() {
  if host_has_4; then say "the host's RabbitMQ is $(host_version): nothing to build"; return; fi
  [[ $(id -u) == 0 ]] || die "must run as root (debootstrap, chroot, unshare)"
  mkdir -p "$(dirname "$ROOT")"
  exec 9>"$ROOT.lock"
  flock 9
  if [[ $(root_version) == 4.* ]]; then say "RabbitMQ $(root_version) in $ROOT"; return; fi
  command -v debootstrap >/dev/null || die "debootstrap is not installed (scripts/install_deps.sh)"
  local url tmp=$ROOT.tmp
  url=$(mirror)
  [[ -n $url ]] || die "no Debian mirror in the host's apt sources (run apt-get update)"
  rm -rf "$tmp"
  say "building a Debian 13 root file system with RabbitMQ in $ROOT from $url (once)"
  debootstrap --variant=minbase "$SUITE" "$tmp" "$url" >"$ROOT.log" 2>&1 ||
    { tail -20 "$ROOT.log" >&2; die "debootstrap failed (log: $ROOT.log)"; }
  # No service may start inside: the package's postinst would try.
  printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
  chmod +x "$tmp/usr/sbin/policy-rc.d"
  chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    rabbitmq-server >>"$ROOT.log" 2>&1 ||
    { tail -20 "$ROOT.log" >&2; die "installing rabbitmq-server failed (log: $ROOT.log)"; }
  chroot "$tmp" apt-get clean
  rm -rf "$ROOT"
  mv "$tmp" "$ROOT"
  [[ $(root_version) == 4.* ]] || die "$ROOT has RabbitMQ '$(root_version)', not 4.x"
  say "RabbitMQ $(root_version) in $ROOT"
}

# Exports what makes the private nodes run RabbitMQ 4.0.
use_4() {
  if host_has_4; then return; fi
  setup
  # Setup's lock is done with: a node started from here must not inherit
  # it, or every later rabbitmq40.sh would wait for that node to stop.
  exec 9>&-
  export OUTBOX_RABBITMQ_ROOT=$ROOT
}

case ${1:-} in
  setup) setup ;;
  test)
    shift
    use_4
    (($# > 0)) || set -- -L e2e
    say "ctest $* against RabbitMQ $(OUTBOX_RABBITMQ_ROOT=${OUTBOX_RABBITMQ_ROOT:-} bash -c \
      'source scripts/lib/rabbitmq_conf.sh; "$RMQ_BIN/rabbitmqctl" version')"
    exec ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 600 "$@"
    ;;
  run)
    shift
    (($# > 0)) || die "run: no command"
    use_4
    exec "$@"
    ;;
  *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
