#include "shared/outbox/message_auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstdlib>
#include <memory>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace outbox {
namespace {

constexpr size_t kMinSecretBytes = 32;
constexpr size_t kMacBytes = 32;  // SHA-256

bool ValidKeyId(absl::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

// Each field with its length first, so no two different messages give the
// same bytes (a body cannot borrow from the reply_to, and so on). The shard
// key, when the message has one, comes last: it picks the consumer shard
// (the consistent-hash exchange), so a replay with another key would reach a
// shard without the message's dedup record.
std::string SignedBytes(absl::string_view message_id, absl::string_view type,
                        absl::string_view reply_to, absl::string_view body,
                        absl::string_view shard_key) {
  std::string out = "outbox-hmac-v1";
  for (absl::string_view field : {message_id, type, reply_to, body}) {
    absl::StrAppend(&out, "\n", field.size(), ":", field);
  }
  if (!shard_key.empty()) absl::StrAppend(&out, "\n", shard_key.size(), ":", shard_key);
  return out;
}

}  // namespace

// One HMAC-SHA256 context per key, keyed once: each MAC starts from a copy of
// it (OpenSSL's one-shot HMAC() looks the algorithms up and keys the context
// on every call, several times the cost of the hash itself).
struct MessageKeys::Mac {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* keyed = nullptr;

  explicit Mac(const std::string& secret) {
    mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    keyed = mac == nullptr ? nullptr : EVP_MAC_CTX_new(mac);
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                                 OSSL_PARAM_END};
    if (keyed == nullptr ||
        EVP_MAC_init(keyed, reinterpret_cast<const unsigned char*>(secret.data()), secret.size(),
                     params) != 1) {
      std::abort();  // OpenSSL without HMAC or SHA-256: nothing can be signed
    }
  }
  ~Mac() {
    EVP_MAC_CTX_free(keyed);
    EVP_MAC_free(mac);
  }

  std::string Of(const std::string& bytes) const {
    EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(keyed);
    unsigned char out[EVP_MAX_MD_SIZE];
    size_t len = 0;
    if (ctx == nullptr ||
        EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()) !=
            1 ||
        EVP_MAC_final(ctx, out, &len, sizeof(out)) != 1) {
      std::abort();  // allocation failure inside OpenSSL
    }
    EVP_MAC_CTX_free(ctx);
    return std::string(reinterpret_cast<const char*>(out), len);
  }
};

MessageKeys::MessageKeys(std::vector<Key> keys) : keys_(std::move(keys)) {
  for (Key& k : keys_) k.mac = std::make_shared<const Mac>(k.secret);
}

absl::StatusOr<MessageKeys> MessageKeys::Parse(absl::string_view text) {
  std::vector<Key> keys;
  std::set<std::string> ids;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": expected '<key id> <secret>'"));
    }
    if (!ValidKeyId(parts[0])) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": a key id is 1-64 of [A-Za-z0-9._-]"));
    }
    if (parts[1].size() < kMinSecretBytes) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": key '", parts[0],
                                                     "' is shorter than ", kMinSecretBytes,
                                                     " bytes (use `openssl rand -hex 32`)"));
    }
    if (!ids.insert(std::string(parts[0])).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": key id '", parts[0], "' appears twice"));
    }
    keys.push_back({std::string(parts[0]), std::string(parts[1]), nullptr});
  }
  if (keys.empty()) return absl::InvalidArgumentError("no key ('<key id> <secret>' lines)");
  return MessageKeys(std::move(keys));
}

std::vector<std::string> MessageKeys::key_ids() const {
  std::vector<std::string> ids;
  for (const Key& k : keys_) ids.push_back(k.id);
  return ids;
}

std::string MessageKeys::Sign(const OutgoingMessage& m) const {
  const Key& key = keys_.front();
  return absl::StrCat(key.id, ":",
                      absl::BytesToHexString(key.mac->Of(
                          SignedBytes(m.message_id, m.type, m.reply_to, m.body, m.shard_key))));
}

absl::Status MessageKeys::Verify(const Delivery& d) const {
  if (d.signature.empty()) return absl::UnauthenticatedError("unsigned message");
  const size_t colon = d.signature.find(':');
  const std::string hex = colon == std::string::npos ? "" : d.signature.substr(colon + 1);
  if (colon == std::string::npos || hex.size() != 2 * kMacBytes ||
      hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return absl::UnauthenticatedError("malformed signature");
  }
  const std::string id = d.signature.substr(0, colon);
  for (const Key& key : keys_) {
    if (key.id != id) continue;
    const std::string want =
        key.mac->Of(SignedBytes(d.message_id, d.type, d.reply_to, d.body, d.shard_key));
    const std::string got = absl::HexStringToBytes(hex);
    if (CRYPTO_memcmp(want.data(), got.data(), kMacBytes) != 0) {
      return absl::UnauthenticatedError(absl::StrCat("bad signature (key '", id, "')"));
    }
    return absl::OkStatus();
  }
  return absl::UnauthenticatedError(
      absl::StrCat("unknown key id '", ValidKeyId(id) ? id : "?", "'"));
}

absl::StatusOr<uint64_t> SigningPublisher::Publish(const OutgoingMessage& message) {
  if (keys_ == nullptr) return inner_.Publish(message);
  OutgoingMessage signed_message = message;
  signed_message.signature = keys_->Sign(message);
  return inner_.Publish(signed_message);
}

absl::Status CheckSignature(const MessageKeys* keys, const Delivery& delivery) {
  return keys == nullptr ? absl::OkStatus() : keys->Verify(delivery);
}

}  // namespace outbox
