#pragma once

// Offline audit of the outbox guarantees (DESIGN.md "Guarantees"): reads
// payment.db and accounting.db read-only, even while the services write them.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace outbox::checker {

inline constexpr size_t kMaxAccountingDbs = 10;  // SQLite attaches at most 10

// The newest schema versions (PRAGMA user_version) whose tables the checks
// know; the services' own lists are service_kit/payment_db_schema.h and
// accounting_service/accounting_db_schema.h. A newer file is refused
// (FAILED_PRECONDITION): its changes could make a check wrong in either
// direction. Older ones, versioned or not, are checked as they are.
inline constexpr int kPaymentDbSchemaVersion = 7;
inline constexpr int kAccountingDbSchemaVersion = 3;
// The same for PostgreSQL databases (their schema_version rows, by schema
// name): the library's outbox tables (shared/postgres/pg_schema.cc),
// payment's (payment_service/payment_pg_store.cc) and accounting's
// (accounting_service/pg_voucher_store.cc).
inline constexpr int kPgOutboxSchemaVersion = 1;
inline constexpr int kPgPaymentSchemaVersion = 1;
inline constexpr int kPgAccountingSchemaVersion = 1;

struct CheckConfig {
  std::string payment_db;
  // accounting.db, or with accounting shards every shard's accounting.db,
  // separated by commas (at most kMaxAccountingDbs): the checks see the union
  // of their vouchers.
  std::string accounting_db;
  absl::Duration stale_after = absl::Minutes(10);
  // A row may legitimately sit in SENDING while a consumer is down, so an
  // operator can choose to see stale rows without failing on them.
  bool fail_on_stale = true;
  int max_examples = 10;
  // Payment shards share accounting: with "s<k>-", only vouchers of payments
  // whose id names this shard must have their payment in `payment_db`.
  // Empty: every voucher (one payment shard).
  std::string payment_id_prefix;
};

struct Counts {
  int64_t payments = 0;
  int64_t outbox_sending = 0;
  int64_t outbox_sent = 0;
  int64_t outbox_failed = 0;
  int64_t outbox_archived = 0;  // 0 when there is no outbox_archive table
  // Payments whose outbox row retention deleted from the archive: no row
  // anywhere, created before the archive's watermark, and booked (a row is
  // archived only once SENT, so its voucher remains).
  int64_t outbox_pruned = 0;
  int64_t vouchers = 0;
  int64_t processed_messages = 0;
};

// One named invariant. Examples are always payment ids (outbox biz_key), the
// one key that finds the rows in both databases and in the service logs.
struct CheckResult {
  std::string name;
  std::string description;
  int64_t count = 0;
  std::vector<std::string> examples;
  bool is_violation = true;  // false: reported for information only
  bool failed() const { return is_violation && count > 0; }
};

struct Report {
  std::string payment_db;
  std::string accounting_db;
  absl::Time now;
  Counts counts;
  // SENDING rows whose voucher exists: accounted, ack not yet processed.
  int64_t sending_with_voucher = 0;
  // The archive's watermark (outbox_retention, unix ms): archived rows
  // acknowledged before it may have been deleted; 0 = none deleted.
  int64_t archive_pruned_before = 0;
  std::vector<CheckResult> checks;

  bool ok() const;
  // Points into this report, so only on an lvalue: `Check().Find(...)`
  // would dangle (ASan found one such use in a test).
  const CheckResult* Find(const std::string& name) const&;
  const CheckResult* Find(const std::string& name) const&& = delete;
};

// A row behind sent_without_voucher or failed_with_voucher, for the repair
// (repair.h), read like the checks: read-only, payment.db's snapshot first.
struct RepairCandidate {
  std::string message_id;
  std::string payment_id;
  // The row's rowid in outbox_archive (an archived row); 0 for a row in outbox.
  int64_t archive_rowid = 0;
  // accounting has recorded the message id as processed: delivered again, the
  // message would be answered as a duplicate and book nothing.
  bool processed = false;
  // Archived rows only: outbox holds a row for the same payment or message id.
  bool live_row = false;
};

struct RepairCandidates {
  std::vector<RepairCandidate> sent_without_voucher;  // outbox rows first, then archived ones
  std::vector<RepairCandidate> failed_with_voucher;
};

// Every row of the two checks (not capped like the examples). Errors as RunChecks.
absl::StatusOr<RepairCandidates> FindRepairCandidates(const CheckConfig& config);

// `now` is injected so the stale-row check is deterministic in tests.
// NotFound for a missing file, FailedPrecondition for a file that is not one
// of our databases or has a newer schema version than this checker knows,
// Unavailable if SQLite stayed busy.
absl::StatusOr<Report> RunChecks(const CheckConfig& config, absl::Time now);

}  // namespace outbox::checker
