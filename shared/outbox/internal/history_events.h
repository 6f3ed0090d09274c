#pragma once

// The events of a message's history (outbox_history.event), one list for
// every store that writes that table: SQLite's (shared/sqlite/internal/
// history.h), PostgreSQL's (shared/postgres/pg_outbox_table.h) and the
// operator's verbs (operator_verbs.h). The happy path writes none.

namespace outbox {

// The newest events kept per message; older ones are deleted as new ones come.
inline constexpr int kHistoryPerMessage = 64;

inline constexpr char kEventRepublished[] = "republished";       // recovery: attempt N
inline constexpr char kEventPublishFailed[] = "publish_failed";  // returned, nacked, timed out
inline constexpr char kEventFailed[] = "failed";                 // attempts spent, or too old
inline constexpr char kEventRejected[] = "rejected";             // the consumer said no
inline constexpr char kEventAcknowledged[] = "acknowledged";  // the consumer's reply, after retries
inline constexpr char kEventRedriven[] = "redriven";          // an operator: FAILED -> SENDING
inline constexpr char kEventFailureSeen[] = "failure_acknowledged";  // an operator: leave FAILED
inline constexpr char kEventRepaired[] = "repaired";                 // the checker's repair

}  // namespace outbox
