#pragma once

// What the three snippets of docs/library.md share: where things are.
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "shared/amqp/amqp_url.h"
#include "shared/outbox/retry_policy.h"
#include "shared/outbox/signing.h"
#include "shared/sqlite/schema.h"

namespace shop {

// OrderPlaced goes here; shipping's replies to "shop.orders.replies".
inline constexpr char kOrders[] = "shop.orders";

struct Setup {
  outbox::AmqpUrl amqp;
  std::string shop_db;      // the producer's file (orders + outbox)
  std::string shipping_db;  // the consumer's file (shipments + inbox)
  outbox::Signing signing;  // the process's keys, for each of its roles
};

const outbox::DbSchema& ShopSchema();

// Backoff and attempt budget: stamped on each row by the producer, applied
// by recovery.
inline outbox::RetryPolicy Retry() {
  outbox::RetryPolicy retry;
  retry.base_delay = absl::Seconds(2);
  retry.max_attempts = 5;
  return retry;
}
absl::Status PlaceOrders(const Setup& setup, int orders);
absl::Status ShipOrders(const Setup& setup, int orders);
absl::Status RunRecovery(const Setup& setup, absl::Duration how_long);

// Polls `done` every 10 ms for up to a minute.
inline void WaitUntil(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + absl::Minutes(1);
  while (!done() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
}

}  // namespace shop
