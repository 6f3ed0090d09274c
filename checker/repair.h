#pragma once

// outbox_check --repair: fixes what the checks found that is safe to fix in
// payment.db, and says what an operator must do about the rest. A dry run
// unless told to apply. The checks stay read-only and self-contained
// (consistency_check.h); the repair writes payment.db through the library
// (state machine, outbox table, history, audit), as the services do, so a
// repaired row is one the services know how to carry on with. accounting.db
// is only read.
//
//   sent_without_voucher      SENT row, accounting has not processed its
//                             message: SENDING, attempts 0, due now
//   archived_without_voucher  the same for an archived row: moved back to
//                             outbox as SENDING
//   failed_with_voucher       FAILED row whose payment is booked: SENT (OnAck)
//
// Everything else is an operator task with one line of what to do.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checker/consistency_check.h"

namespace outbox::checker {

// outbox_audit, outbox_history and outbox.restarted_at, which the repair
// writes, are in payment.db from this schema version on.
inline constexpr int kRepairPaymentDbSchemaVersion = 7;

// The repairs' names: outbox_audit.target, and the report's.
inline constexpr char kRepairSentWithoutVoucher[] = "sent_without_voucher";
inline constexpr char kRepairArchivedWithoutVoucher[] = "archived_without_voucher";
inline constexpr char kRepairFailedWithVoucher[] = "failed_with_voucher";

struct RepairOptions {
  bool apply = false;  // false: a dry run, only its audit records are written
  std::string actor;   // outbox_audit.actor and outbox_history.instance
  // Rows per write transaction: each is short, so the services' writers wait
  // for a few milliseconds at most.
  int page_size = 200;
  int busy_timeout_ms = 5000;
};

// One kind of repair: the rows it changed (or would change, dry run).
struct RepairAction {
  std::string target;  // kRepair...
  std::vector<std::string> payment_ids;
  // Rows that changed between the read and the write (e.g. a late
  // acknowledgement): left alone; the next run looks at them again.
  std::vector<std::string> skipped;
};

// A violation the repair leaves to an operator.
struct OperatorTask {
  std::string check;  // the check's name
  std::string payment_id;
  std::string what_to_do;
};

struct RepairResult {
  bool applied = false;
  std::vector<RepairAction> actions;  // only kinds with rows
  std::vector<OperatorTask> tasks;
  // Tasks of checks whose rows are not all listed (the report keeps
  // max_examples ids per check).
  int64_t tasks_not_listed = 0;
  int64_t audit_records = 0;  // written to outbox_audit

  // Nothing left for an operator (after a dry run: nothing once applied).
  bool complete() const;
};

// Repairs what `report` and `candidates` (both from the same files, read just
// before) show. FAILED_PRECONDITION for a payment.db older than
// kRepairPaymentDbSchemaVersion, UNAVAILABLE while it stayed busy: pages
// committed before stay committed, each with its audit record.
absl::StatusOr<RepairResult> Repair(const CheckConfig& config, const Report& report,
                                    const RepairCandidates& candidates,
                                    const RepairOptions& options, absl::Time now);

std::string FormatRepairText(const RepairResult& result);
// One JSON object: {"applied", "actions": [{target, rows, payment_ids,
// skipped}], "tasks": [{check, payment_id, what_to_do}], "tasks_not_listed",
// "audit_records", "complete"}.
std::string FormatRepairJson(const RepairResult& result);

// outbox_check --repair after flag parsing: the checks, the repair, and the
// exit status: 0 nothing left for an operator (consistent, or every
// violation repaired; a dry run: would be), 1 violations that need an
// operator remain, 2 usage or I/O error. With `json` one object: the
// report's, with the repair's under "repair".
int RunRepairAndPrint(const CheckConfig& config, const RepairOptions& options, absl::Time now,
                      bool json, std::ostream& out, std::ostream& err);

}  // namespace outbox::checker
