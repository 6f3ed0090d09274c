#pragma once

// What the shop's processes share: queue names, the producer's schema (recovery
// opens the same file), the retry policy, and a small command line parser
// (with the signing flags of the three programs).
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/amqp/amqp_url.h"
#include "shared/outbox/retry_policy.h"
#include "shared/outbox/signing.h"
#include "shared/sqlite/schema.h"

namespace shop {

inline constexpr char kDefaultOrdersQueue[] = "shop.orders";

// OrderPlaced goes to the orders queue; shipping's replies to
// "<queue>.replies" (the roles' default, outbox::DefaultReplyQueue).

// The order's id and the id of its OrderPlaced message (the consumer's dedup key).
std::string OrderId(long number);
inline std::string MessageId(const std::string& order_id) {
  return order_id + ".placed";
}

// shop.db: orders and the outbox tables (migration 1).
const outbox::DbSchema& ShopSchema();
// shipping.db: shipments (one per order) and the inbox (migration 1).
const outbox::DbSchema& ShippingSchema();

// Stamped on each row by shop_orders, applied by shop_recovery. A short base
// delay so a lost message is re-published within seconds; enough attempts
// that a broker restart or a consumer outage never exhausts a row.
inline outbox::RetryPolicy Retry() {
  outbox::RetryPolicy retry;
  retry.base_delay = absl::Seconds(1);
  retry.max_delay = absl::Seconds(5);
  retry.max_attempts = 30;
  return retry;
}

// --name=value and --name (a switch, "true") arguments; anything else, or a
// name not in `known`, is an error.
class Flags {
 public:
  static absl::StatusOr<Flags> Parse(int argc, char** argv,
                                     const std::map<std::string, std::string>& known);
  // `known` and the signing flags: --message_keys=PATH and --allow_unsigned.
  static std::map<std::string, std::string> WithSigning(std::map<std::string, std::string> known);
  const std::string& Get(const std::string& name) const { return values_.at(name); }
  absl::StatusOr<long> Int(const std::string& name) const;
  bool Switch(const std::string& name) const { return Get(name) == "true"; }
  // Non-empty, or INVALID_ARGUMENT naming the flag.
  absl::StatusOr<std::string> Required(const std::string& name) const;
  absl::StatusOr<outbox::AmqpUrl> Url() const;
  // The process's signing: the keys of --message_keys, or unsigned when
  // --allow_unsigned names it. Neither: not chosen, and the roles refuse to
  // start, saying so.
  absl::StatusOr<outbox::Signing> Signing() const;

 private:
  std::map<std::string, std::string> values_;
};

// Prints `status` and the usage line to stderr; returns exit status 2.
int Usage(const absl::Status& status, const char* usage);
// Prints "<program>: <status>" to stderr; returns exit status 1.
int Fail(const char* program, const absl::Status& status);

}  // namespace shop
