#pragma once

// The client half of the gRPC security settings, shared by every client
// (outboxctl, outbox_demo, the bench, the health probe, the tests): TLS
// channel credentials from PEM files and a bearer token read from a file and
// sent with every call. Only gRPC, Abseil and shared/base here, so clients
// of the API contract can link it without the services' libraries.
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "shared/base/internal/small_file.h"  // ReadSmallFile, ReadTokenFile

namespace outbox {

// The client's TLS files. No CA and no certificate = plaintext. With a CA,
// the server's certificate must chain to it (and name the host dialled);
// with cert + key the client also presents them (mTLS).
struct TlsClientFiles {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool enabled() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
};

// Insecure credentials when `files` is empty, else SSL credentials.
// INVALID_ARGUMENT naming the flag: a certificate without its key (or the
// reverse) or a file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFrom(
    const TlsClientFiles& files);

// A channel that sends `authorization: Bearer <token>` with every call when
// `token` is not empty (a client interceptor, so plaintext channels carry it
// too, unlike gRPC's call credentials).
std::shared_ptr<grpc::Channel> CreateChannelWithToken(
    const std::string& addr, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, const std::string& token);

}  // namespace outbox
