#include "service_kit/service_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service_kit/grpc/channel_security.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"

namespace outbox {

std::string PaymentShardsExchange(const std::string& pay_queue) {
  return absl::StrCat(pay_queue, ".hash");
}

std::string PaymentShardQueue(const std::string& pay_queue, int shard, int shards) {
  return shards <= 1 ? pay_queue : absl::StrCat(pay_queue, "-", shard);
}

std::string ServiceConfig::payment_event_queue(int shard) const {
  return PaymentShardQueue(pay_queue, shard, accounting_shards);
}

std::vector<std::string> ServiceConfig::payment_event_queues() const {
  std::vector<std::string> queues;
  for (int k = 0; k < accounting_shards; ++k) queues.push_back(payment_event_queue(k));
  return queues;
}

Topology ServiceConfig::payment_events() const {
  Topology t{payment_event_queues(), queue_type, kPaymentsExchange};
  if (accounting_shards > 1) {
    t.hash_exchange = PaymentShardsExchange(pay_queue);
    t.hash_routing_key = pay_queue;  // what payment_writer and recovery publish with
  }
  return t;
}

std::string ServiceConfig::message_signing() const {
  if (!message_keys) return "off";
  return absl::StrCat("key ", message_keys->signing_key_id(), " (accepts ",
                      absl::StrJoin(message_keys->key_ids(), ","), ")");
}

absl::StatusOr<BearerTokenCheck> LoadBearerToken(const std::string& path, const std::string& flag) {
  if (path.empty()) return BearerTokenCheck();
  std::string warning;
  ASSIGN_OR_RETURN(std::string contents, ReadTokenFile(path, flag, &warning));
  if (!warning.empty()) LogWarning("token_file_too_open", {KV("warning", warning)});
  auto tokens = ParseTokenList(contents);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", path, "': ", tokens.status().message()));
  }
  LogInfo("token_check_on", {KV("flag", flag), KV("file", path), KV("tokens", tokens->size())});
  return BearerTokenCheck(*std::move(tokens));
}

}  // namespace outbox
