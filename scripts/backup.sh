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
#       backup pair (done by `backup`). Safe while the services run: it
#       reads ACCOUNTING_DB in a read transaction of its own (accounting's
#       writer is not blocked), then writes PAYMENT_DB in one short write
#       transaction, without a checkpoint of its own (scripts/lib/sqlite.sh).
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
# sqlite_read, sqlite_write: a busy timeout, so a writer's short lock is
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

reconcile() {  # reconcile PAYMENT_DB ACCOUNTING_DB
  local payment=$1 accounting=$2 now reset
  [[ -f $payment && -f $accounting ]] || die "reconcile needs both files ($payment, $accounting)"
  now=$(($(date +%s%N) / 1000000))
  # First the SENT rows without a voucher, in read transactions only (an
  # attached file in a BEGIN IMMEDIATE would be write-locked too, and
  # accounting's batches would fail meanwhile); then, with accounting.db
  # detached, one write transaction on payment.db. A row booked in between
  # only gets one more delivery, which accounting answers as a duplicate.
  reset=$(sqlite_write "$payment" \
    "ATTACH DATABASE $(quoted "$accounting") AS acc" \
    "CREATE TEMP TABLE unbooked AS
       SELECT message_id FROM outbox
        WHERE status = 'SENT' AND biz_type = 'payment'
          AND NOT EXISTS (SELECT 1 FROM acc.vouchers v WHERE v.payment_id = outbox.biz_key)" \
    "DETACH DATABASE acc" \
    "BEGIN IMMEDIATE" \
    "UPDATE outbox SET status = 'SENDING', sent_at = 0, next_retry_at = $now, updated_at = $now,
            last_error = 'restored: no voucher in the accounting database'
      WHERE status = 'SENT' AND message_id IN (SELECT message_id FROM temp.unbooked)" \
    "SELECT changes()" \
    "COMMIT") || die "reconcile of $payment against $accounting failed"
  echo "backup: reconciled $payment with $accounting: $reset SENT row(s) without a voucher back to SENDING"
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
