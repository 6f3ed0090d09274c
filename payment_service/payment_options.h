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

namespace outbox::payment {

// The defaults are the flags' built-in ones (no environment).
struct PaymentServiceOptions {
  std::string listen = "127.0.0.1:50051";  // --payment_listen
  std::string db = "payment.db";           // --payment_db
  std::string metrics_listen;              // empty = no /metrics
  int publish_window = 1024;
  int prefetch = 1024;
  int group_commit_max = 512;
  int64_t max_unsent = 512;
  int max_hold_ms = 20;
  int ack_linger_ms = 5;
  ServiceConfig service;  // the flags every service shares
  BearerTokenCheck auth;  // from --api_token_file
  ShardConfig shard;      // --payment_shards and --payment_shard_index

  // INVALID_ARGUMENT naming the flag. The listen addresses are not checked
  // here: that probes this host (ValidateListenAddress, at start-up).
  absl::Status Validate() const;
};

}  // namespace outbox::payment
