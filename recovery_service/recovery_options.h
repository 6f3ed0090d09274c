#pragma once

// recovery_service's own settings as one plain struct (the binary's flags,
// recovery_flags.cc, fill it), checked by Validate() so that the checks are
// unit-tested without a command line.
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service_kit/grpc/server_security.h"
#include "service_kit/service_config.h"
#include "shared/observability/internal/alerts.h"
#include "shared/outbox/internal/recovery_options.h"

namespace outbox::recovery {

// The flags' built-in defaults (no environment) are these, the worker's
// RecoveryOptions', but for worker.instance_id, which OptionsFromFlags()
// makes <hostname>-<pid>.
struct RecoveryServiceOptions {
  std::string listen = "127.0.0.1:50053";  // --recovery_listen
  std::string payment_db = "payment.db";
  absl::Duration payment_db_wait = absl::Seconds(30);
  std::string metrics_listen;  // empty = no /metrics
  std::string runbook_url = kDefaultRunbookBase;
  // The --recovery_* worker settings, the backlog, housekeeping, alert and
  // retention ones, and the queues and retry policy of the shared flags.
  RecoveryOptions worker;
  ServiceConfig service;  // the flags every service shares
  BearerTokenCheck auth;  // from --ops_token_file

  // INVALID_ARGUMENT naming the setting. The listen addresses are not
  // checked here: that probes this host (ValidateListenAddress, at start-up).
  absl::Status Validate() const;
};

}  // namespace outbox::recovery
