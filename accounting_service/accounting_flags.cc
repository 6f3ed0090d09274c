#include "accounting_service/accounting_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service_kit/service_flags.h"
#include "shared/base/status_macros.h"
#include "shared/runtime/internal/env.h"

using outbox::EnvOr;
using outbox::EnvOrDuration;
using outbox::EnvOrInt;

namespace {
// The built-in defaults: AccountingServiceOptions' (accounting_options.h).
const outbox::accounting::AccountingServiceOptions& Defaults() {
  static const auto* const defaults = new outbox::accounting::AccountingServiceOptions();
  return *defaults;
}
}  // namespace

ABSL_FLAG(std::string, accounting_listen, EnvOr("ACCOUNTING_LISTEN", Defaults().listen),
          "gRPC listen address host:port [env ACCOUNTING_LISTEN]");
ABSL_FLAG(std::string, accounting_db, EnvOr("ACCOUNTING_DB", Defaults().db),
          "where vouchers and processed message ids are kept: a SQLite file, or a "
          "postgresql:// URI of a PostgreSQL database (its password in PGPASSFILE, not the URI; "
          "several instances may share one database) [env ACCOUNTING_DB]");
ABSL_FLAG(std::string, metrics_listen, EnvOr("ACCOUNTING_METRICS_LISTEN", ""),
          "Prometheus /metrics on host:port; empty = off [env ACCOUNTING_METRICS_LISTEN]");
ABSL_FLAG(int, prefetch, EnvOrInt("AMQP_PREFETCH", Defaults().prefetch),
          "PAY_QUEUE prefetch, also the largest batch applied in one transaction "
          "[env AMQP_PREFETCH]");
ABSL_FLAG(int, consume_linger_ms, EnvOrInt("CONSUME_LINGER_MS", Defaults().consume_linger_ms),
          "a batch waits until it holds --consume_linger_batch messages or this long has passed "
          "since its first, so that messages arriving close together share one transaction, "
          "fsync and reply; adds at most this much to create->SENT. 0: no wait "
          "[env CONSUME_LINGER_MS]");
ABSL_FLAG(int, consume_linger_batch,
          EnvOrInt("CONSUME_LINGER_BATCH", Defaults().consume_linger_batch),
          "the batch size that ends a linger at once (see --consume_linger_ms) "
          "[env CONSUME_LINGER_BATCH]");
ABSL_FLAG(int, accounting_shard, EnvOrInt("ACCOUNTING_SHARD", Defaults().shard),
          "which of the --accounting_shards this instance is, 0..M-1: it consumes "
          "<pay_queue>-<shard> (pay_queue itself when M is 1) into its own --accounting_db "
          "[env ACCOUNTING_SHARD]");
ABSL_FLAG(std::string, api_token_file, EnvOr("API_TOKEN_FILE", ""),
          "file holding the client token; when set every AccountingService call needs "
          "'authorization: Bearer <token>' (health and reflection stay open) [env API_TOKEN_FILE]");
ABSL_FLAG(absl::Duration, processed_retention,
          EnvOrDuration("PROCESSED_RETENTION", Defaults().processed_retention),
          "processed message ids older than this are deleted, a batch at a time; 0 keeps them "
          "all. A pruned id books nothing again: the payment's voucher stays "
          "[env PROCESSED_RETENTION]");
ABSL_FLAG(std::string, reply_queues, EnvOr("REPLY_QUEUES", ""),
          "reply queues to declare and bind besides ACC_QUEUE, comma-separated: each payment "
          "shard's (e.g. ACC_QUEUE.s0,ACC_QUEUE.s1); replies go to each message's reply_to "
          "[env REPLY_QUEUES]");

ABSL_FLAG(std::string, accepted_currencies, EnvOr("ACCEPTED_CURRENCIES", ""),
          "currencies accounting keeps, comma-separated ISO 4217 codes (e.g. EUR,USD); a payment "
          "in another is answered with a business reject (the payment's row turns FAILED, kind "
          "rejected). Empty: any [env ACCEPTED_CURRENCIES]");

namespace outbox::accounting {

absl::StatusOr<AccountingServiceOptions> OptionsFromFlags() {
  AccountingServiceOptions o;
  o.listen = absl::GetFlag(FLAGS_accounting_listen);
  ASSIGN_OR_RETURN(o.service, ServiceConfigFromFlags());
  ASSIGN_OR_RETURN(o.auth, LoadBearerToken(absl::GetFlag(FLAGS_api_token_file), "api_token_file"));
  o.db = absl::GetFlag(FLAGS_accounting_db);
  o.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.prefetch = absl::GetFlag(FLAGS_prefetch);
  o.consume_linger_ms = absl::GetFlag(FLAGS_consume_linger_ms);
  o.consume_linger_batch = absl::GetFlag(FLAGS_consume_linger_batch);
  o.shard = absl::GetFlag(FLAGS_accounting_shard);
  o.processed_retention = absl::GetFlag(FLAGS_processed_retention);
  o.reply_queues = absl::StrSplit(absl::GetFlag(FLAGS_reply_queues), ',', absl::SkipEmpty());
  o.currencies = absl::StrSplit(absl::GetFlag(FLAGS_accepted_currencies), ',', absl::SkipEmpty());
  return o;
}

}  // namespace outbox::accounting
