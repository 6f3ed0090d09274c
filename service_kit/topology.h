#pragma once

// The system's exchanges, one per writer, so that broker permissions decide
// who may feed which queue (docs/security.md, broker users). Each queue is
// bound to its exchange by its own name (shared/amqp/internal/amqp_client.h).
namespace outbox {

inline constexpr char kPaymentsExchange[] = "outbox.payments";  // payment, recovery write
inline constexpr char kRepliesExchange[] = "outbox.replies";    // accounting, recovery write

}  // namespace outbox
