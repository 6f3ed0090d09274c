#!/usr/bin/env bash
# Online backups of the two databases, and the reconciliation a restore needs.
#
#   scripts/backup.sh backup DEST PAYMENT_DB ACCOUNTING_DB
#       Copies both files into DEST/ (payment.db, accounting.db) while the
#       services run, each with SQLite's VACUUM INTO (one read transaction:
#       a consistent, compact copy; writers are not blocked). accounting.db
#       is copied FIRST, then payment.db, and the payment copy is reconciled
#       with the accounting copy (below): every voucher in the pair has its
#       payment, and every SENT row its voucher, so the pair passes
#       outbox_check. Both copies are checked with PRAGMA integrity_check
#       (quick_check does not compare indexes with their tables).
#
#   scripts/backup.sh reconcile PAYMENT_DB ACCOUNTING_DB
#       Puts every SENT outbox row whose voucher is not in ACCOUNTING_DB back
#       to SENDING, due now: recovery_service delivers it again and accounting
#       books it once. Run it after restoring accounting.db to an older point
#       (payment's SENT rows are the ledger of what was booked), and on a
#       backup pair (done by `backup`). It is `outbox_check --repair --apply`
#       (the same code as the services' state machine: attempts reset, pages
#       of 200 rows in short write transactions, each row's history and an
#       audit record under the actor `$USER (backup.sh)`), so it is safe
#       while the services run; it also closes FAILED rows whose payment is
#       booked, and prints what only an operator can do. outbox_check is
#       found as $OUTBOX_CHECK, then build/bin/outbox_check, then on PATH.
#
# Prints one line per step with the counts. Exit 0 on success, 1 on any
# failure (the destination is left incomplete then), 2 on a usage error.
# With accounting shards, back up each shard's accounting.db and reconcile
# against each (outbox_check takes them comma-separated).
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
die() { echo "backup: $*" >&2; exit 1; }
command -v sqlite3 >/dev/null || die "needs sqlite3 (scripts/install_deps.sh)"
# sqlite_read: a busy timeout, so a writer's short lock is
# waited out rather than failed on; a writing shell never checkpoints.
# shellcheck source=SCRIPTDIR/lib/sqlite.sh
source "$(dirname "$0")/lib/sqlite.sh"

# SQL literal of a path.
quoted() { printf "'%s'" "${1//\'/\'\'}"; }

copy() {  # copy SRC DEST: VACUUM INTO, then integrity_check of the copy
  local src=$1 dest=$2 check started
  [[ -f $src ]] || die "$src does not exist"
  rm -f "$dest"
  sqlite_read "$src" "VACUUM INTO $(quoted "$dest")" || die "VACUUM INTO from $src failed"
  started=$(date +%s%N)
  check=$(sqlite_read "$dest" "PRAGMA integrity_check") || die "integrity_check of $dest failed"
  [[ $check == ok ]] || die "$dest: integrity_check says $check"
  echo "backup: $dest: integrity_check ok ($(( ($(date +%s%N) - started) / 1000000 )) ms)"
}

checker() {  # the outbox_check binary
  local built
  built="$(cd "$(dirname "$0")/.." && pwd)/build/bin/outbox_check"
  if [[ -n ${OUTBOX_CHECK:-} ]]; then echo "$OUTBOX_CHECK"
  elif [[ -x $built ]]; then echo "$built"
  elif command -v outbox_check >/dev/null; then command -v outbox_check
  else die "needs outbox_check (build it with scripts/build.sh, or set OUTBOX_CHECK)"
  fi
}

reconcile() {  # reconcile PAYMENT_DB ACCOUNTING_DB
  local payment=$1 accounting=$2 bin out rc=0 reopened
  [[ -f $payment && -f $accounting ]] || die "reconcile needs both files ($payment, $accounting)"
  bin=$(checker)
  # Exit 0: everything repaired; 1: repaired, and tasks left for an
  # operator (listed below); 2: nothing could be read or written.
  out=$("$bin" --json --payment_db="$payment" --accounting_db="$accounting" \
    --repair --apply --actor="${USER:-$(id -un)} (backup.sh)") || rc=$?
  ((rc <= 1)) || die "reconcile of $payment against $accounting failed (outbox_check exit $rc)"
  reopened=$(/usr/bin/python3 -c '
import json, sys
repair = json.load(sys.stdin)["repair"]
print(sum(a["rows"] for a in repair["actions"]
          if a["target"] in ("sent_without_voucher", "archived_without_voucher")))
for a in repair["actions"]:
    if a["target"] == "failed_with_voucher":
        print("backup: %d FAILED row(s) whose payment is booked closed SENT" % a["rows"], file=sys.stderr)
for t in repair["tasks"]:
    print("backup: operator task: %s %s: %s" % (t["check"], t["payment_id"], t["what_to_do"]),
          file=sys.stderr)' <<<"$out") || die "cannot read outbox_check's report"
  echo "backup: reconciled $payment with $accounting: $reopened SENT row(s) without a voucher back to SENDING"
}

counts() {  # one line of row counts for a pair
  local payment=$1 accounting=$2
  echo "backup: $payment: $(sqlite_read "$payment" "SELECT count(*) || ' payments, ' ||
      (SELECT count(*) FROM outbox WHERE status = 'SENDING') || ' SENDING, ' ||
      (SELECT count(*) FROM outbox WHERE status = 'SENT') || ' SENT, ' ||
      (SELECT count(*) FROM outbox WHERE status = 'FAILED') || ' FAILED' FROM payments")"
  echo "backup: $accounting: $(sqlite_read "$accounting" "SELECT count(*) || ' vouchers, ' ||
      (SELECT count(*) FROM processed_messages) || ' processed messages' FROM vouchers")"
}

case ${1:-} in
  backup)
    (($# == 4)) || usage
    dest=$2 payment=$3 accounting=$4
    mkdir -p "$dest"
    # accounting first: a voucher copied has its payment in the later copy.
    copy "$accounting" "$dest/accounting.db"
    copy "$payment" "$dest/payment.db"
    reconcile "$dest/payment.db" "$dest/accounting.db"
    counts "$dest/payment.db" "$dest/accounting.db"
    echo "backup: done: $dest/payment.db $dest/accounting.db"
    ;;
  reconcile)
    (($# == 3)) || usage
    reconcile "$2" "$3"
    ;;
  *)
    usage
    ;;
esac
