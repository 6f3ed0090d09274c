#pragma once

// Server scaffolding every service shares: the standard health service and
// server reflection (v1 and v1alpha), so grpcurl-style tools work without the
// proto files, and every listed service, health included, resolves to its
// file descriptor. grpc++_reflection carries the v1alpha protos, so clients
// of v1alpha (tests) never link this.
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service_kit/grpc/call_gate.h"
#include "service_kit/grpc/server_security.h"

namespace outbox {

// Builds and starts a server on `listen` (host:port; port 0 picks one) with
// the standard health service and server reflection v1 and v1alpha, and
// each of `services` behind its token check (call_gate.h; health and
// reflection stay open). `bound_port` receives
// the port actually bound. A port another process listens on is not shared
// (no SO_REUSEPORT): FAILED_PRECONDITION "cannot listen on <listen>: <why>".
// With `tls` set it serves TLS (mTLS with a client CA) and nothing in
// plaintext; a bad TLS setting is INVALID_ARGUMENT naming the flag.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(
    const std::string& listen, const std::vector<ServedService>& services, int* bound_port,
    const TlsServerFiles& tls = {});

// Load limits of every server. Requests here are a few hundred bytes, so a
// larger one is refused (RESOURCE_EXHAUSTED) before it is parsed; one
// connection cannot open unbounded streams; clients that ping more often
// than kMinClientPingInterval without data are sent GOAWAY after
// kMaxPingStrikes such pings.
inline constexpr int kMaxReceiveMessageBytes = 1 << 20;  // 1 MiB
inline constexpr int kMaxConcurrentStreams = 256;
inline constexpr absl::Duration kMinClientPingInterval = absl::Seconds(10);
inline constexpr int kMaxPingStrikes = 2;

// Stops accepting calls and lets in-flight ones finish; calls still running
// after the grace period are cancelled. gRPC also waits out the grace period
// while clients keep idle connections open, so it is kept short: unary calls
// here take milliseconds.
inline constexpr absl::Duration kShutdownGrace = absl::Seconds(2);
void ShutdownGrpcServer(grpc::Server& server);

// gRPC's own log lines (errors, unless GRPC_VERBOSITY says otherwise) become
// ours: one `grpc_log file=... message=...` line each, not gRPC's format.
void SendGrpcLogsToOurLog();

}  // namespace outbox
