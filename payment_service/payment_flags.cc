#include "payment_service/payment_flags.h"

#include "absl/flags/flag.h"
#include "service_kit/service_flags.h"
#include "shared/base/status_macros.h"
#include "shared/runtime/internal/env.h"

using outbox::EnvOr;
using outbox::EnvOrInt;

namespace {
// The built-in defaults: PaymentServiceOptions' (payment_options.h).
const outbox::payment::PaymentServiceOptions& Defaults() {
  static const auto* const defaults = new outbox::payment::PaymentServiceOptions();
  return *defaults;
}
}  // namespace

ABSL_FLAG(std::string, payment_listen, EnvOr("PAYMENT_LISTEN", Defaults().listen),
          "gRPC listen address host:port [env PAYMENT_LISTEN]");
ABSL_FLAG(std::string, payment_db, EnvOr("PAYMENT_DB", Defaults().db),
          "SQLite file, or a postgresql:// URI (its password in a passfile, never in the "
          "URI), holding payments and the outbox [env PAYMENT_DB]");
ABSL_FLAG(std::string, metrics_listen, EnvOr("PAYMENT_METRICS_LISTEN", ""),
          "Prometheus /metrics on host:port; empty = off [env PAYMENT_METRICS_LISTEN]");
ABSL_FLAG(int, publish_window, EnvOrInt("PUBLISH_WINDOW", Defaults().publish_window),
          "unconfirmed messages in flight on the fast path [env PUBLISH_WINDOW]");
ABSL_FLAG(int, prefetch, EnvOrInt("AMQP_PREFETCH", Defaults().prefetch),
          "ACC_QUEUE prefetch, also the ack batch size [env AMQP_PREFETCH]");
ABSL_FLAG(int, group_commit_max, EnvOrInt("GROUP_COMMIT_MAX", Defaults().group_commit_max),
          "most payments committed in one transaction [env GROUP_COMMIT_MAX]");
ABSL_FLAG(int64_t, max_unsent, EnvOrInt("MAX_UNSENT", Defaults().max_unsent),
          "while accounting replies but this many payments are SENDING, new payments wait "
          "(up to --max_hold_ms) for its acks; 0 = never [env MAX_UNSENT]");
ABSL_FLAG(int, max_hold_ms, EnvOrInt("MAX_HOLD_MS", Defaults().max_hold_ms),
          "longest a new payment waits for accounting's backlog [env MAX_HOLD_MS]");
ABSL_FLAG(int, ack_linger_ms, EnvOrInt("ACK_LINGER_MS", Defaults().ack_linger_ms),
          "accounting's acknowledgements wait up to this long for new payments to share their "
          "commit (one fsync for both) when no payment is queued; 0 = commit them at once. Adds "
          "at most this much to create->SENT [env ACK_LINGER_MS]");
ABSL_FLAG(std::string, api_token_file, EnvOr("API_TOKEN_FILE", ""),
          "file holding the client token; when set every PaymentService call needs "
          "'authorization: Bearer <token>' (health and reflection stay open) [env API_TOKEN_FILE]");
ABSL_FLAG(std::string, payment_shards, EnvOr("PAYMENT_SHARDS", ""),
          "every payment shard's gRPC address host:port, comma-separated, by shard index; "
          "empty = one shard [env PAYMENT_SHARDS]");
ABSL_FLAG(int, payment_shard_index, EnvOrInt("PAYMENT_SHARD_INDEX", 0),
          "this instance's index in --payment_shards [env PAYMENT_SHARD_INDEX]");

namespace outbox::payment {

absl::StatusOr<PaymentServiceOptions> OptionsFromFlags() {
  PaymentServiceOptions o;
  o.listen = absl::GetFlag(FLAGS_payment_listen);
  ASSIGN_OR_RETURN(o.service, ServiceConfigFromFlags());
  ASSIGN_OR_RETURN(o.auth, LoadBearerToken(absl::GetFlag(FLAGS_api_token_file), "api_token_file"));
  ASSIGN_OR_RETURN(o.shard, ParseShardConfig(absl::GetFlag(FLAGS_payment_shards),
                                             absl::GetFlag(FLAGS_payment_shard_index)));
  o.db = absl::GetFlag(FLAGS_payment_db);
  o.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.publish_window = absl::GetFlag(FLAGS_publish_window);
  o.prefetch = absl::GetFlag(FLAGS_prefetch);
  o.group_commit_max = absl::GetFlag(FLAGS_group_commit_max);
  o.max_unsent = absl::GetFlag(FLAGS_max_unsent);
  o.max_hold_ms = absl::GetFlag(FLAGS_max_hold_ms);
  o.ack_linger_ms = absl::GetFlag(FLAGS_ack_linger_ms);
  return o;
}

}  // namespace outbox::payment
