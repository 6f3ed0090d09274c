#pragma once

// The flags every service binary shares, defined once (service_flags.cc) so
// the three binaries read the same names and environment variables. The
// file is compiled into each service executable (CMake target
// outbox_service_flags), never into a library: a flag belongs to the binary
// that parses it, and the libraries take the plain ServiceConfig.
#include "absl/status/statusor.h"
#include "service_kit/grpc/channel_security.h"
#include "service_kit/service_config.h"
#include "service_kit/service_main.h"

namespace outbox {

// Reads and validates the shared flags; INVALID_ARGUMENT names the bad one.
// The TLS files (gRPC and AMQP) are read once here, so a bad one stops the
// start early.
absl::StatusOr<ServiceConfig> ServiceConfigFromFlags();

// What `--health_check` dials with: TLS when the service's own TLS flags are
// set, trusting --tls_ca_file (or else --tls_client_ca_file), and presenting
// the service's certificate when it requires client certificates.
TlsClientFiles HealthProbeTlsFromFlags();

// --health_check and the TLS to probe with, for RunServiceMain.
HealthCheckRequest HealthCheckFromFlags();

}  // namespace outbox
