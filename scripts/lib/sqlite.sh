# shellcheck shell=bash
# The only ways scripts and tests run the sqlite3 shell on a database file
# (sourced, not run). tests/sqlite_shell_calls_test.sh fails on any other
# call of sqlite3 that is not -readonly.
#
# Why: the services checkpoint the write-ahead log only while they hold the
# write lock (shared/sqlite/internal/wal_checkpointer.h). SQLite 3.7.0 to 3.51.2
# (except the patched 3.44.6 line; Debian 12 has 3.40.1) can lose pages when
# a checkpoint without that lock meets a writer starting the log over, and
# the shell's own autocheckpoint after a commit is such a checkpoint. So a
# writing shell turns it off: the services' checkpointer does the work.

# sqlite_write DB [ARGS...]: sqlite3 on DB with a 10 s busy timeout, stop at
# the first error, and no checkpoint of its own. ARGS are statements, or
# none to read them from stdin.
sqlite_write() {
  local db=$1
  shift
  sqlite3 -batch -bail -cmd '.timeout 10000' \
    -cmd '.output /dev/null' -cmd 'PRAGMA wal_autocheckpoint=0' -cmd '.output stdout' \
    "$db" "$@"
}

# sqlite_read DB [ARGS...]: the same, opened read-only (a reader never
# checkpoints).
sqlite_read() {
  local db=$1
  shift
  sqlite3 -readonly -batch -bail -cmd '.timeout 10000' "$db" "$@"
}
