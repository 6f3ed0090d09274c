#pragma once

// payment_service's own settings as one plain struct (the binary's flags,
// payment_flags.cc, fill it), checked by Validate() so that the checks are
// unit-tested without a command line.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "payment_service/shard_guard.h"
#include "service_kit/grpc/server_security.h"
#include "service_kit/service_config.h"
#include "shared/roles/producer.h"

namespace outbox::payment {

// The flags' built-in defaults (no environment) are these; the producer's
// settings take the library's (Producer::Options, GroupWriterOptions).
struct PaymentServiceOptions {
  std::string listen = "127.0.0.1:50051";  // --payment_listen
  std::string db = "payment.db";           // --payment_db
  std::string metrics_listen;              // empty = no /metrics
  int publish_window = static_cast<int>(Producer::Options{}.window);
  // ACC_QUEUE's prefetch is the largest batch of acknowledgements one group
  // commit marks SENT; 1024 rather than the library's reply_prefetch (256)
  // lets a backlog of them close in fewer commits (docs/performance.md, The
  // knobs).
  int prefetch = 1024;
  int group_commit_max = static_cast<int>(GroupWriterOptions{}.max_batch);
  int64_t max_unsent = GroupWriterOptions{}.max_unsent;
  int max_hold_ms = static_cast<int>(absl::ToInt64Milliseconds(GroupWriterOptions{}.max_hold));
  int ack_linger_ms = static_cast<int>(absl::ToInt64Milliseconds(GroupWriterOptions{}.ack_linger));
  ServiceConfig service;  // the flags every service shares
  BearerTokenCheck auth;  // from --api_token_file
  ShardConfig shard;      // --payment_shards and --payment_shard_index

  // INVALID_ARGUMENT naming the flag. The listen addresses are not checked
  // here: that probes this host (ValidateListenAddress, at start-up).
  absl::Status Validate() const;
};

}  // namespace outbox::payment
