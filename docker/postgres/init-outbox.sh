# shellcheck shell=bash
# pg-primary's /docker-entrypoint-initdb.d script (docker-compose.yml,
# profile `pg`), run once by the postgres image's entrypoint on a new data
# directory, as the user postgres against the server it started on its
# socket. Sourced by the official image's entrypoint, so no `set` and no
# `exit` here: a failing psql stops the entrypoint (ON_ERROR_STOP).
#
# Roles `payment` (payment_service, recovery_service) and `accounting`
# (accounting_service), each owning its database (payments, accounting) and
# the only one besides the superuser that may connect to it; their
# passwords from PAYMENT_DB_PASSWORD and ACCOUNTING_DB_PASSWORD, read by
# psql's \getenv (never on a command line). Replication connections of the
# superuser from the network (pg-standby's pg_basebackup and WAL receiver),
# with the password.
psql -v ON_ERROR_STOP=1 -X -q -h /var/run/postgresql -U "${POSTGRES_USER:-postgres}" -d postgres <<'SQL'
\getenv payment_pw PAYMENT_DB_PASSWORD
\getenv accounting_pw ACCOUNTING_DB_PASSWORD
SELECT :'payment_pw' <> '' AND :'accounting_pw' <> '' AS passwords_set \gset
\if :passwords_set
\else
  \warn 'set PAYMENT_DB_PASSWORD and ACCOUNTING_DB_PASSWORD'
  SELECT 1/0;
\endif
CREATE ROLE payment LOGIN PASSWORD :'payment_pw';
CREATE ROLE accounting LOGIN PASSWORD :'accounting_pw';
CREATE DATABASE payments OWNER payment;
CREATE DATABASE accounting OWNER accounting;
REVOKE CONNECT, TEMPORARY ON DATABASE payments, accounting FROM PUBLIC;
GRANT CONNECT ON DATABASE payments TO payment;
GRANT CONNECT ON DATABASE accounting TO accounting;
SQL
printf 'host replication %s all scram-sha-256\n' "${POSTGRES_USER:-postgres}" >>"$PGDATA/pg_hba.conf"
