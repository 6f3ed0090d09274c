#pragma once

// W3C Trace Context (https://www.w3.org/TR/trace-context/): the
// `traceparent` value "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"
// travels in gRPC metadata and AMQP message headers, so one request's trace
// id can be followed through every service's logs, and a collector that
// speaks the standard can join them (no tracing library is needed for that).
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace outbox {

inline constexpr char kTraceparentHeader[] = "traceparent";

struct TraceContext {
  std::string trace_id;  // 32 lower-case hex digits, not all zero
  std::string span_id;   // 16 lower-case hex digits, not all zero
  std::string flags = "01";

  std::string Traceparent() const;  // "00-trace-span-flags"
};

// A valid version-00 traceparent (other versions: their first four fields, as
// the standard says); nullopt for anything else.
std::optional<TraceContext> ParseTraceparent(absl::string_view value);

// A new trace with a random trace id and span id.
TraceContext NewTrace();
// The same trace, a new span: this service's step in it.
TraceContext ChildSpan(const TraceContext& parent);
// Continues `traceparent` when valid, else starts a new trace.
TraceContext ContinueOrStart(absl::string_view traceparent);

// The trace id of a stored traceparent ("" when it is not one), for logs.
std::string TraceIdOf(absl::string_view traceparent);

}  // namespace outbox
