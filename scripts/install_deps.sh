#!/usr/bin/env bash
# Installs the Debian packages the build, tests and demo need, only those
# that are missing (a no-op on a machine that has them all). Debian 12
# (bookworm) and 13 (trixie); a few packages differ between them.
#   scripts/install_deps.sh          install what is missing
#   scripts/install_deps.sh --list   print this release's packages, one a line
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  postgresql libpq-dev
  libsqlitecpp-dev libsqlite3-dev libabsl-dev librabbitmq-dev libgtest-dev libgmock-dev libssl-dev libcurl4-openssl-dev nlohmann-json3-dev prometheus-cpp-dev
  rabbitmq-server docker-compose prometheus prometheus-alertmanager sqlite3 amqp-tools procps openssl curl iproute2 nftables faketime iputils-ping jq clang-format
  python3-grpcio
  chromium chromium-driver python3-selenium libjs-chart.js
)
# By release (VERSION_CODENAME in /etc/os-release): from Debian 13 on,
# promtool is a package of its own (Debian 12's prometheus ships it).
# Debian 12 also runs the tests on RabbitMQ 4.0, from a Debian 13 root file
# system that debootstrap builds (scripts/rabbitmq40.sh).
# shellcheck disable=SC1091  # the machine's own file
release=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
case $release in
  bookworm) PACKAGES+=(debootstrap) ;;
  *) PACKAGES+=(promtool) ;;
esac
if [[ ${1:-} == --list ]]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

echo "install_deps: installing ${missing[*]}"
SUDO=()
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || { echo "install_deps: need root or sudo" >&2; exit 1; }
  SUDO=(sudo)
fi

# Keep the packages' postinst scripts from starting the system rabbitmq-server
# and alertmanager services: we run private instances. Only remove the
# policy file if we put it there.
POLICY=/usr/sbin/policy-rc.d
if [[ ! -e $POLICY ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$POLICY" >/dev/null
  "${SUDO[@]}" chmod 755 "$POLICY"
  trap '"${SUDO[@]}" rm -f "$POLICY"' EXIT
fi

# The PostgreSQL server package would create a cluster "main" (and start it
# at the next boot): tests and development run private servers
# (scripts/postgres_node.sh). A drop-in of postgresql-common's
# createcluster.conf, written before the first install, turns that off; the
# file itself is ucf's, the directory nobody's.
if [[ " ${missing[*]} " == *" postgresql "* ]]; then
  "${SUDO[@]}" mkdir -p /etc/postgresql-common/createcluster.d
  echo 'create_main_cluster = false' |
    "${SUDO[@]}" tee /etc/postgresql-common/createcluster.d/outbox-no-main-cluster.conf >/dev/null
fi

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
