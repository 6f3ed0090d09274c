#include "shared/testing/consistency.h"

namespace outbox::testing {

::testing::AssertionResult IsConsistent(const std::string& producer_db,
                                        const std::string& consumer_db,
                                        const ConsistencyOptions& options) {
  absl::StatusOr<ConsistencyReport> report = CheckConsistency(producer_db, consumer_db, options);
  if (!report.ok()) return ::testing::AssertionFailure() << report.status();
  if (!report->ok) return ::testing::AssertionFailure() << report->ToString();
  return ::testing::AssertionSuccess() << report->ToString();
}

}  // namespace outbox::testing
