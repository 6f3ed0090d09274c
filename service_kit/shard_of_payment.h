#pragma once

// Which payment shard owns a payment: a pure function of the idempotency key
// that the shards and every client compute alike (docs/deployment.md, Payment shards),
// and the payment id's prefix that names the shard it was created on.
// Header-only, standard library only, so the client library (client/) may include it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace outbox {

// FNV-1a, 64 bits, over the key's bytes.
inline uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Lamping and Veach's jump consistent hash: a bucket in [0, buckets). Going
// from N to N+1 buckets moves only 1/(N+1) of the keys (all to the new one).
inline int JumpConsistentHash(uint64_t key, int buckets) {
  int64_t b = -1;
  int64_t j = 0;
  while (j < buckets) {
    b = j;
    key = key * 2862933555777941757ULL + 1;
    j = static_cast<int64_t>(static_cast<double>(b + 1) * (static_cast<double>(1LL << 31) /
                                                           static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<int>(b);
}

// The shard of a payment: JumpConsistentHash(Fnv1a64(idempotency_key), shards);
// 0 with one shard (or none configured).
inline int ShardOfKey(std::string_view idempotency_key, int shards) {
  if (shards <= 1) return 0;
  return JumpConsistentHash(Fnv1a64(idempotency_key), shards);
}

// What shard `shard`'s payment ids start with: "s<shard>-"; nothing in a
// single-shard deployment, whose ids stay plain UUIDs.
inline std::string PaymentIdPrefix(int shard, int shards) {
  if (shards <= 1) return "";
  return "s" + std::to_string(shard) + "-";
}

// The shard a payment id names ("s<digits>-..."), or nullopt for an id
// without that prefix (a single-shard deployment's).
inline std::optional<int> ShardOfPaymentId(std::string_view payment_id) {
  if (payment_id.size() < 3 || payment_id[0] != 's') return std::nullopt;
  int shard = 0;
  size_t i = 1;
  for (; i < payment_id.size() && i <= 6 && payment_id[i] >= '0' && payment_id[i] <= '9'; ++i) {
    shard = shard * 10 + (payment_id[i] - '0');
  }
  if (i == 1 || i >= payment_id.size() || payment_id[i] != '-') return std::nullopt;
  return shard;
}

}  // namespace outbox
