#!/usr/bin/env bash
# Writes docs/configuration.md from every binary's --help, run in an empty
# environment so that the defaults shown are the built-in ones.
#
#   scripts/gen_config_docs.sh [BIN_DIR]          rewrite docs/configuration.md
#   scripts/gen_config_docs.sh --check [BIN_DIR]  exit 1 (with a diff) if the
#                                                 page differs from the binaries
#
# BIN_DIR defaults to build/bin. The help texts live beside the flags
# (ABSL_FLAG in each <service>_flags.cc, service_kit/service_flags.cc and
# the tools' main.cc): change
# them there, then run this script.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [[ ${1:-} == --check ]]; then check=1; shift; fi
BIN=$(realpath "${1:-$ROOT/build/bin}")
PAGE=$ROOT/docs/configuration.md

# In the order a reader meets them.
BINARIES=(payment_service accounting_service recovery_service outboxctl outbox_check
          outbox_demo outbox_bench claim_bench)
# Sections written by hand (programs that are not C++ binaries), kept from
# the page as they are, after the generated ones: each from its heading to
# the next "## " heading.
HAND_WRITTEN=("console gateway")

help_of() {
  local out rc=0
  # Abseil's own --help names each flag's source file by its build path:
  # absolute, or relative to the build directory when ccache's base_dir
  # (CCACHE_BASEDIR) rewrote it.
  out=$(cd / && env -i PATH=/usr/bin:/bin "$BIN/$1" --help 2>&1) || rc=$?
  # absl's default --help exits 1; ours exit 0.
  if ((rc != 0 && rc != 1)); then
    echo "gen_config_docs: $1 --help exited $rc" >&2
    return 1
  fi
  printf '%s\n' "$out" | sed -e "s|/\?${ROOT#/}/||g" -e 's|Flags from \(\.\./\)*|Flags from |' \
    -e 's/[[:space:]]*$//'
}

render() {
  cat <<'EOF'
# Configuration reference

For whoever runs one of the programs: every flag of every binary, and the
environment variable each one defaults from. This page is generated from the
binaries' `--help` by `scripts/gen_config_docs.sh`; the unit test
`docs.configuration` fails when it differs from what they print. To change
it, change the flag's help text beside its `ABSL_FLAG` and run the script.

## Conventions

- Every service flag defaults from the environment variable named in its
  help (`[env PAYMENT_DB]`), so docker-compose and systemd units set
  variables; a flag given on the command line wins. The defaults below are
  the built-in ones (the generator runs each binary in an empty
  environment).
- Durations use Abseil's format: `500ms`, `10s`, `1h30m`.
- `AMQP_URL` follows the AMQP URI spec: `amqp://user@host:5672/%2F` is the
  default vhost `/`. A cluster's nodes go in one URL, comma-separated, with
  one user and vhost: `amqp://user@10.0.0.1:5672,10.0.0.2:5672/%2F`. No
  password is built in; give it with `AMQP_PASSWORD_FILE` (see
  [security](security.md)).
- The stores: `PAYMENT_DB` and `ACCOUNTING_DB` are a SQLite file's path
  (the default), or a PostgreSQL database as a libpq URI, `postgresql://`
  or `postgres://`, for example
  `postgresql://payment@db1:5432,db2:5432/payments?target_session_attrs=read-write`
  (several hosts: the read-write one is used, and found again after a
  failover). Keep the password out of the URI: libpq reads it from the
  file `PGPASSFILE` names (mode 0600) or from the URI's `passfile=`; logs
  and `--help` show a URI without its password. The SQLite settings
  (`SQLITE_SYNCHRONOUS`, and payment's `ACK_LINGER_MS`) do not apply to
  PostgreSQL; payment's `MAX_UNSENT` and `MAX_HOLD_MS` do, counting the
  SENDING payments of the whole database
  ([deployment](deployment.md#postgresql-replicas-on-one-database-a-standby-that-takes-over)).
- The services and `outboxctl`: `--help` prints this text and exits 0;
  `--version` prints the version, the commit it was built from (none
  outside a git checkout) and the build type. An unknown flag, a value that
  does not parse or a stray argument exits 2 with one line and the usage
  line. `outbox_check` exits 0 after `--help` and 2 on such a usage error
  too, with Abseil's `--version` (no version or commit). `outbox_demo` and
  the benches keep Abseil's own `--help`, `--version` and errors (exit 1
  after `--help` or a bad flag). Every start-up error of a
  service exits 2 with one log line `<name>_failed error="..."` naming the
  flag, before any broker connection is tried.
- `--health_check=host:port` turns any service binary into a probe for
  container healthchecks: one `grpc.health.v1.Health/Check` call, exit 0 if
  SERVING, 1 otherwise. It has no environment default, so an inherited
  variable cannot turn a service into a probe.
- SIGTERM or SIGINT stops a service cleanly: calls in flight finish, the
  writer drains, what was committed is published, the recovery lease is
  released.
EOF
  local b
  for b in "${BINARIES[@]}"; do
    [[ -x $BIN/$b ]] || { echo "gen_config_docs: $BIN/$b is missing (build first)" >&2; return 1; }
    printf '\n## %s\n\n```text\n%s\n```\n' "$b" "$(help_of "$b")"
  done
  local title
  for title in "${HAND_WRITTEN[@]}"; do
    [[ -f $PAGE ]] || continue
    awk -v h="## $title" '$0 == h { keep = 1; print ""; print; next } /^## / { keep = 0 } keep' "$PAGE"
  done
}

new=$(render)
if ((check)); then
  if ! diff -u "$PAGE" <(printf '%s\n' "$new"); then
    echo "FAIL: docs/configuration.md is not what the binaries print; run scripts/gen_config_docs.sh" >&2
    exit 1
  fi
  echo "PASS: docs/configuration.md matches ${#BINARIES[@]} binaries' --help"
else
  printf '%s\n' "$new" >"$PAGE"
  echo "gen_config_docs: wrote docs/configuration.md"
fi
