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

namespace outbox::accounting {

// The defaults are the flags' built-in ones (no environment).
struct AccountingServiceOptions {
  std::string listen = "127.0.0.1:50052";  // --accounting_listen
  std::string db = "accounting.db";        // --accounting_db
  std::string metrics_listen;              // empty = no /metrics
  int prefetch = 256;
  int consume_linger_ms = 20;                             // --consume_linger_ms
  int consume_linger_batch = 4;                           // --consume_linger_batch
  int shard = 0;                                          // --accounting_shard
  absl::Duration processed_retention = absl::Hours(720);  // zero keeps every id
  std::vector<std::string> reply_queues;  // --reply_queues, split, empty names dropped
  std::vector<std::string> currencies;    // --accepted_currencies, split; empty = any
  ServiceConfig service;                  // the flags every service shares
  BearerTokenCheck auth;                  // from --api_token_file

  // INVALID_ARGUMENT naming the flag. The listen addresses are not checked
  // here: that probes this host (ValidateListenAddress, at start-up).
  absl::Status Validate() const;
};

}  // namespace outbox::accounting
