#pragma once

// The server half of the gRPC security settings: TLS server credentials from
// PEM files, and the bearer-token check every call of a protected service
// passes before its handler runs (call_gate.h). Health and reflection are
// never behind it, so they stay open.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace outbox {

// The server's TLS files. None = plaintext (the default, for loopback use).
// cert + key = TLS; with client_ca_file as well, clients must present a
// certificate that chains to it (mTLS).
struct TlsServerFiles {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  bool enabled() const {
    return !cert_file.empty() || !key_file.empty() || !client_ca_file.empty();
  }
};

// Insecure credentials when `files` is empty, else SSL credentials.
// INVALID_ARGUMENT naming the flag (--tls_cert_file, --tls_key_file,
// --tls_client_ca_file): a certificate without its key, a client CA without
// a certificate, a file that cannot be read or is not PEM.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFrom(
    const TlsServerFiles& files);

// Compares in time that depends only on the lengths, not on where the first
// difference is, so a caller cannot learn a token byte by byte.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// `metadata` must carry `authorization: Bearer <expected>`. UNAUTHENTICATED
// when there is no bearer token, PERMISSION_DENIED when it is not
// `expected`. The messages never contain either token.
absl::Status CheckBearerToken(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                              absl::string_view expected);

// One accepted token and the name it goes by in audit records and logs.
struct NamedToken {
  std::string name;
  std::string token;
};

// The shortest token a server accepts: a guessable one is refused at start.
inline constexpr size_t kMinTokenLength = 16;

// A token file's contents: one bare token (named "operator"), or one
// "NAME TOKEN" per line (blank lines and lines starting with # skipped). A
// token holds no space or tab; a line of two words is NAME TOKEN, NAME being
// 1 to 64 letters, digits, '.', '_', '-' or '@'. INVALID_ARGUMENT naming the
// line (never the token) for anything else, a token shorter than
// kMinTokenLength, a name or token given twice, or no token at all.
absl::StatusOr<std::vector<NamedToken>> ParseTokenList(absl::string_view contents);

// The check in front of every method of a protected service (call_gate.h:
// the server asks it, not the handlers). Without a token (the default)
// every call passes.
class BearerTokenCheck {
 public:
  BearerTokenCheck() = default;
  explicit BearerTokenCheck(std::string token) : tokens_{{"operator", std::move(token)}} {}
  explicit BearerTokenCheck(std::vector<NamedToken> tokens) : tokens_(std::move(tokens)) {}

  bool enabled() const { return !tokens_.empty(); }
  // OK, or the gRPC status to return at once.
  grpc::Status Check(const grpc::ServerContextBase& context) const;  // sync or callback handlers
  // Who made the call, for the audit trail: the name of the bearer token it
  // carries; without a token check, the client certificate's subject
  // ("x509:<common name>") when the call came over mutual TLS; else
  // "anonymous".
  std::string Actor(const grpc::ServerContextBase& context) const;

 private:
  std::vector<NamedToken> tokens_;
};

}  // namespace outbox
