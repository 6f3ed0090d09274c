#pragma once

// The pattern's end state, read from a producer's file and its consumer's
// (plain SQLite, read-only, one snapshot of both, while the services write
// them): no outbox row is left SENDING (or FAILED), every row its consumer
// acknowledged was applied there (its message id is in the inbox), the
// inbox holds no message the producer never wrote, and the adopter's own
// invariants hold. A production checker runs it on a schedule; a system
// test once its load has drained (the test kit's IsConsistent,
// shared/testing/consistency.h, wraps it for EXPECT_TRUE).
//
// It reads outbox.status and outbox.message_id, outbox_archive.message_id
// (CreateOutboxTable, outbox_table.cc) and the inbox's message_id
// (CreateInboxTable, inbox.cc; options.inbox names the table).
//
//   auto report = outbox::CheckConsistency(
//       "orders.db", "shipping.db",
//       {{{"order without its shipment",
//          "SELECT count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 "
//          "FROM consumer.shipments s WHERE s.order_id = o.order_id)"}}});
//   if (report.ok() && !report->ok) Alert(report->ToString());
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/sqlite/inbox.h"

namespace outbox {

struct ConsistencyOptions {
  // name, and a SELECT counting what breaks it: it runs on the producer's
  // file with the consumer's attached as "consumer". Each must count 0.
  std::vector<std::pair<std::string, std::string>> invariants;
  // FAILED rows are expected (a test that makes its consumer reject).
  bool allow_failed = false;
  // The inbox also holds messages of other producers (not counted as unknown).
  bool other_producers = false;
  InboxTable inbox;  // where the consumer keeps it
};

struct ConsistencyReport {
  // The producer's rows: the outbox by status, and the archive.
  int64_t sending = 0, sent = 0, failed = 0, archived = 0;
  int64_t inbox = 0;      // the consumer's inbox rows
  int64_t unapplied = 0;  // SENT or archived rows whose message id the inbox lacks
  int64_t unknown = 0;    // inbox rows whose message id the producer never wrote
  std::vector<std::pair<std::string, int64_t>> broken;  // invariants counting more than 0
  bool ok = false;

  // "OK sending=0 sent=12 ..." or "NOT CONSISTENT ...", naming each broken invariant.
  std::string ToString() const;
};

// NOT_FOUND when a file is missing; INTERNAL when it cannot be read (an
// invariant's SQL included).
absl::StatusOr<ConsistencyReport> CheckConsistency(const std::string& producer_db,
                                                   const std::string& consumer_db,
                                                   const ConsistencyOptions& options = {});

// Checks until the state is consistent or `timeout` has passed; the last report.
absl::StatusOr<ConsistencyReport> WaitUntilConsistent(const std::string& producer_db,
                                                      const std::string& consumer_db,
                                                      const ConsistencyOptions& options,
                                                      absl::Duration timeout);

}  // namespace outbox
