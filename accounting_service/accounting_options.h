#pragma once

// accounting_service's own settings as one plain struct (the binary's flags,
// accounting_flags.cc, fill it), checked by Validate() so that the checks are
// unit-tested without a command line.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service_kit/grpc/server_security.h"
#include "service_kit/service_config.h"
#include "shared/roles/consumer.h"

namespace outbox::accounting {

// The flags' built-in defaults (no environment) are these; the consumer's
// settings take the library's (Consumer::Options).
struct AccountingServiceOptions {
  std::string listen = "127.0.0.1:50052";  // --accounting_listen
  std::string db = "accounting.db";        // --accounting_db
  std::string metrics_listen;              // empty = no /metrics
  int prefetch = Consumer::Options{}.prefetch;
  // --consume_linger_ms. The library does not wait (Consumer::Options::linger
  // is zero); accounting waits 20 ms so that at low rates about four
  // payments share a transaction, an fsync and a reply, for at most 20 ms
  // more create->SENT (docs/performance.md, CONSUME_LINGER_MS).
  int consume_linger_ms = 20;
  int consume_linger_batch = Consumer::Options{}.linger_batch;  // --consume_linger_batch
  int shard = 0;                                                // --accounting_shard
  // Zero keeps every id.
  absl::Duration processed_retention = Consumer::Options{}.inbox_retention;
  std::vector<std::string> reply_queues;  // --reply_queues, split, empty names dropped
  std::vector<std::string> currencies;    // --accepted_currencies, split; empty = any
  ServiceConfig service;                  // the flags every service shares
  BearerTokenCheck auth;                  // from --api_token_file

  // INVALID_ARGUMENT naming the flag. The listen addresses are not checked
  // here: that probes this host (ValidateListenAddress, at start-up).
  absl::Status Validate() const;
};

}  // namespace outbox::accounting
