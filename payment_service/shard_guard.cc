#include "payment_service/shard_guard.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service_kit/shard_of_payment.h"

namespace outbox::payment {

absl::StatusOr<ShardConfig> ParseShardConfig(absl::string_view addresses, int index) {
  ShardConfig config;
  config.index = index;
  if (!addresses.empty()) {
    for (absl::string_view a : absl::StrSplit(addresses, ',')) {
      if (a.empty() || a.find(':') == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("--payment_shards: '", a,
                         "' is not host:port (a comma-separated list, by shard index)"));
      }
      config.addresses.emplace_back(a);
    }
  }
  if (index < 0 || index >= config.count()) {
    return absl::InvalidArgumentError(absl::StrCat("--payment_shard_index=", index,
                                                   " is not in 0..", config.count() - 1,
                                                   " (one per address in --payment_shards)"));
  }
  return config;
}

grpc::Status ShardGuard::Elsewhere(grpc::ServerContextBase& context, int shard,
                                   absl::string_view what) const {
  const std::string& address = config_.addresses[static_cast<size_t>(shard)];
  context.AddTrailingMetadata(kShardHeader, std::to_string(shard));
  context.AddTrailingMetadata(kShardAddressHeader, address);
  return grpc::Status(
      grpc::StatusCode::FAILED_PRECONDITION,
      absl::StrCat(what, " belongs to payment shard ", shard, " at ", address, " (this is shard ",
                   config_.index, " of ", config_.count(), ")"));
}

grpc::Status ShardGuard::CheckKey(grpc::ServerContextBase& context,
                                  absl::string_view idempotency_key) const {
  if (config_.count() <= 1 || idempotency_key.empty()) return grpc::Status::OK;
  const int shard = ShardOfKey({idempotency_key.data(), idempotency_key.size()}, config_.count());
  if (shard == config_.index) return grpc::Status::OK;
  return Elsewhere(context, shard, "idempotency_key");
}

grpc::Status ShardGuard::CheckPaymentId(grpc::ServerContextBase& context,
                                        absl::string_view payment_id) const {
  if (config_.count() <= 1) return grpc::Status::OK;
  const std::optional<int> shard = ShardOfPaymentId({payment_id.data(), payment_id.size()});
  if (!shard || *shard == config_.index) return grpc::Status::OK;
  if (*shard >= config_.count()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("payment '", payment_id, "' names shard ", *shard,
                                     " but there are ", config_.count(), " shards"));
  }
  return Elsewhere(context, *shard, "payment_id");
}

ShardIds::ShardIds(IdGenerator& ids, const ShardConfig& config)
    : ids_(ids), prefix_(PaymentIdPrefix(config.index, config.count())) {}

}  // namespace outbox::payment
