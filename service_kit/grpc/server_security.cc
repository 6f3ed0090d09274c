#include "service_kit/grpc/server_security.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "service_kit/grpc/channel_security.h"
#include "service_kit/grpc/grpc_status.h"

namespace outbox {
namespace {

constexpr absl::string_view kBearerPrefix = "Bearer ";

absl::Status LooksLikePem(const std::string& contents, const std::string& flag,
                          const std::string& path) {
  if (!absl::StrContains(contents, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", path, "' is not PEM"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFrom(
    const TlsServerFiles& files) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls_cert_file and --tls_key_file (TLS_CERT_FILE, TLS_KEY_FILE); "
        "--tls_client_ca_file only adds client verification");
  }
  auto cert = ReadSmallFile(files.cert_file, "tls_cert_file");
  if (!cert.ok()) return cert.status();
  if (absl::Status s = LooksLikePem(*cert, "tls_cert_file", files.cert_file); !s.ok()) return s;
  auto key = ReadSmallFile(files.key_file, "tls_key_file");
  if (!key.ok()) return key.status();
  if (absl::Status s = LooksLikePem(*key, "tls_key_file", files.key_file); !s.ok()) return s;
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (!files.client_ca_file.empty()) {
    auto ca = ReadSmallFile(files.client_ca_file, "tls_client_ca_file");
    if (!ca.ok()) return ca.status();
    if (absl::Status s = LooksLikePem(*ca, "tls_client_ca_file", files.client_ca_file); !s.ok()) {
      return s;
    }
    options.pem_root_certs = *std::move(ca);
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  options.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  return grpc::SslServerCredentials(options);
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Walk the longer one whole, so the time depends on the lengths only.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  // volatile: keep the compiler from turning the loop into an early exit.
  volatile unsigned char result = diff;
  return result == 0;
}

absl::Status CheckBearerToken(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                              absl::string_view expected) {
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError("missing 'authorization: Bearer <token>' metadata");
  }
  const absl::string_view value(it->second.data(), it->second.size());
  if (!absl::StartsWithIgnoreCase(value, kBearerPrefix)) {
    return absl::UnauthenticatedError("the authorization metadata is not 'Bearer <token>'");
  }
  if (!ConstantTimeEquals(value.substr(kBearerPrefix.size()), expected)) {
    return absl::PermissionDeniedError("the bearer token is not valid");
  }
  return absl::OkStatus();
}

namespace {

bool IsTokenName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        c != '@') {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<NamedToken>> ParseTokenList(absl::string_view contents) {
  std::vector<NamedToken> tokens;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipWhitespace());
    if (words.size() == 1) {
      tokens.push_back({"operator", std::string(words[0])});
    } else if (words.size() == 2) {
      // A token holds no space, so two words are NAME TOKEN. An older file
      // whose one token held a space would be read as a name and a token:
      // refused unless its first word is a name.
      if (!IsTokenName(words[0])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "token file line ", line_no,
            ": two words are 'NAME TOKEN', and NAME must be 1 to 64 letters, digits, '.', '_', "
            "'-' or '@' (a token holds no space)"));
      }
      tokens.push_back({std::string(words[0]), std::string(words[1])});
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("token file line ", line_no,
                       ": want 'NAME TOKEN' or one bare token (a token holds no space)"));
    }
    if (tokens.back().token.size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token file line ", line_no, ": the token of '", tokens.back().name, "' is shorter than ",
          kMinTokenLength, " characters (make one with `openssl rand -hex 16`)"));
    }
  }
  if (tokens.empty()) return absl::InvalidArgumentError("the token file holds no token");
  for (size_t i = 0; i < tokens.size(); ++i) {
    for (size_t j = i + 1; j < tokens.size(); ++j) {
      if (tokens[i].name == tokens[j].name || tokens[i].token == tokens[j].token) {
        return absl::InvalidArgumentError(
            absl::StrCat("token file: '", tokens[j].name,
                         "' repeats a name or a token (a bare token counts as 'operator')"));
      }
    }
  }
  return tokens;
}

grpc::Status BearerTokenCheck::Check(const grpc::ServerContextBase& context) const {
  if (tokens_.empty()) return grpc::Status::OK;
  absl::Status last;
  for (const NamedToken& t : tokens_) {
    last = CheckBearerToken(context.client_metadata(), t.token);
    if (last.ok() || !absl::IsPermissionDenied(last)) return ToGrpcStatus(last);
  }
  return ToGrpcStatus(last);
}

std::string BearerTokenCheck::Actor(const grpc::ServerContextBase& context) const {
  for (const NamedToken& t : tokens_) {
    if (CheckBearerToken(context.client_metadata(), t.token).ok()) return t.name;
  }
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr) {
    for (const char* property : {"x509_common_name", "x509_subject"}) {
      std::vector<grpc::string_ref> values = auth->FindPropertyValues(property);
      if (!values.empty()) {
        return absl::StrCat("x509:", absl::string_view(values[0].data(), values[0].size()));
      }
    }
  }
  return "anonymous";
}

}  // namespace outbox
