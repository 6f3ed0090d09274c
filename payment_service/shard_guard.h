#pragma once

// Payment shards (docs/deployment.md, Payment shards): each payment_service instance owns
// the payments whose idempotency key hashes to its index
// (service_kit/shard_of_payment.h) and names them "s<index>-...". A call that
// belongs to another shard is answered, never served: FAILED_PRECONDITION,
// the message naming the shard and its address, and the same in trailing
// metadata, so a client can go there. One shard (the default) checks nothing.
#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/base/internal/ids.h"

namespace outbox::payment {

// Trailing metadata of a wrong-shard answer.
inline constexpr char kShardHeader[] = "outbox-payment-shard";                 // "<index>"
inline constexpr char kShardAddressHeader[] = "outbox-payment-shard-address";  // "host:port"

struct ShardConfig {
  int index = 0;
  std::vector<std::string> addresses;  // every shard's gRPC address, by index; empty = one shard
  int count() const { return addresses.empty() ? 1 : static_cast<int>(addresses.size()); }
};

// From --payment_shards ("host:port,host:port,...", empty = one shard) and
// --payment_shard_index; INVALID_ARGUMENT naming the flag.
absl::StatusOr<ShardConfig> ParseShardConfig(absl::string_view addresses, int index);

class ShardGuard {
 public:
  ShardGuard() = default;
  explicit ShardGuard(ShardConfig config) : config_(std::move(config)) {}

  // OK when `idempotency_key` belongs here (an empty key too: validation
  // answers it); otherwise the wrong-shard answer, its metadata set on `context`.
  grpc::Status CheckKey(grpc::ServerContextBase& context, absl::string_view idempotency_key) const;
  // OK when `payment_id` names this shard (or no shard at all).
  grpc::Status CheckPaymentId(grpc::ServerContextBase& context, absl::string_view payment_id) const;

  const ShardConfig& config() const { return config_; }

 private:
  grpc::Status Elsewhere(grpc::ServerContextBase& context, int shard, absl::string_view what) const;

  ShardConfig config_;
};

// Prefixes every id with this shard's "s<index>-" (nothing with one shard):
// payment ids name their shard, and so do message ids.
class ShardIds final : public IdGenerator {
 public:
  ShardIds(IdGenerator& ids, const ShardConfig& config);
  std::string NewId() override { return prefix_ + ids_.NewId(); }

 private:
  IdGenerator& ids_;
  const std::string prefix_;
};

}  // namespace outbox::payment
