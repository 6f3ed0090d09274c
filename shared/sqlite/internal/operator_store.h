#pragma once

// The operator's view of a producer's SQLite database (OperatorRepository,
// shared/outbox/internal/operator_repository.h), over the file a
// RecoveryStore opened: listings and counts, re-drive and acknowledge (one
// row or a failure group), a message's history and the audit trail, and the
// file's metrics. Each change is audited in the transaction that makes it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/base/internal/page.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/operator_repository.h"
#include "shared/outbox/internal/operator_verbs.h"
#include "shared/outbox/message.h"
#include "shared/sqlite/internal/audit.h"
#include "shared/sqlite/internal/history.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

class OperatorStore final : public OperatorVerbs {
 public:
  // Works on the file `recovery` opened, which must outlive it: one file,
  // one writer connection, for the loop and the operator alike.
  explicit OperatorStore(RecoveryStore& recovery);

  absl::StatusOr<MessagePage> List(OutboxStatus status, int64_t after_id, int limit) override;
  absl::StatusOr<OutboxCounts> Counts() override;
  absl::StatusOr<int64_t> OldestSendingCreatedAt() override;
  // The history as history.h keeps it.
  absl::StatusOr<std::vector<HistoryEvent>> History(const std::string& message_id_or_biz_key,
                                                    OutboxMessage* row) override;
  absl::StatusOr<std::vector<AuditRecord>> Audit(int64_t before_id, int limit) override;
  // Also the file's SQLite metrics (under the ProducerDb's metrics_label).
  void RegisterMetrics(MetricsRegistry& metrics, const Clock& clock) override;

 protected:
  absl::Status InTransaction(
      const std::string& what,
      const std::function<absl::Status(OperatorTransaction&)>& body) override;

 private:
  SqliteFile& db_;
  const std::string metrics_label_;
};

}  // namespace outbox
