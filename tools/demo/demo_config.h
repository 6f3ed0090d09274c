#pragma once

// outbox_demo's settings, as main.cc reads them from the flags, and the
// limits and retry policies every step of a run shares.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/channel.h"
#include "client/retry.h"

namespace outbox::demo {

inline constexpr int kMaxReplays = 5;  // replays checked, and GetVoucher spot checks
inline constexpr int kMaxCreateFailures = 20;
inline constexpr int kListAttempts = 5;
inline constexpr absl::Duration kCallTimeout = absl::Seconds(10);
inline constexpr char kDescription[] = "outbox demo payment";

struct Config {
  std::vector<std::string> payment_addrs;  // one per payment shard
  std::string accounting_addr;
  absl::Duration duration, timeout;
  bool by_time = false;   // --duration > 0
  int64_t count = 0;      // payments to create (0 when by_time)
  bool creating = false;  // this run creates payments
  int concurrency = 1;
  bool retry = false, checks = false, wait_sent = true, report_all = false;
  int wait_healthy = 0;
  std::string write_ids;
  std::vector<std::string> expected_ids;  // of --expect_ids
  client::ChannelSecurity security;       // --tls_*, --token_file
};

// A few quick tries on UNAVAILABLE and DEADLINE_EXCEEDED: the service may be
// briefly away. Also the checks' policy, so a refusal comes back at once.
client::RetryPolicy FewTries();

// --retry: every error but a permanent one, until `timeout`.
client::RetryPolicy UntilTimeout(absl::Duration timeout);

}  // namespace outbox::demo
