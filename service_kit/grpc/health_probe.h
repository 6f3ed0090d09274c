#pragma once

// A client of gRPC's standard health protocol: one grpc.health.v1.Health/Check
// call. Container healthchecks use it through `<service> --health_check=ADDR`
// (service_kit/service_main.cc), so an image needs no probe tool of its own.
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "service_kit/grpc/channel_security.h"

namespace outbox {

// OK when the server at `addr` (host:port) reports the whole server ("")
// SERVING within `deadline`. FAILED_PRECONDITION naming the status it
// reported otherwise; the call's own error (UNAVAILABLE, DEADLINE_EXCEEDED)
// when nothing answered; INVALID_ARGUMENT when `addr` is not host:port or a
// TLS file is unusable. With `tls` set it speaks TLS.
absl::Status ProbeHealth(const std::string& addr, absl::Duration deadline,
                         const TlsClientFiles& tls = {});

}  // namespace outbox
