#pragma once

// What the contract suites (outbox_contract.h, inbox_contract.h) are run
// against: an implementation of the seams and the suite's way into its
// storage. Separate from the suites, which define TEST_Ps and go in one .cc
// of a test binary; sqlite_under_test.h makes these for SQLite files.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "shared/outbox/repository.h"
#include "shared/testing/manual_clock.h"

namespace outbox::testing {

struct OutboxUnderTest {
  OutboxRepository* outbox = nullptr;             // the producer's seam (null: not implemented)
  RecoveryRepository* recovery = nullptr;         // recovery's seam (null: not implemented)
  std::function<void(const OutboxMessage&)> add;  // store a row
  std::function<std::optional<OutboxMessage>(const std::string&)> get;  // read it back
  // The archive and the audit trail, for the retention tests (null: skipped).
  std::function<std::vector<std::string>()> archived;  // message ids in the archive
  std::function<void(int64_t at, const std::string& action)> add_audit;  // store a record
  std::function<std::vector<std::string>()> audit;  // the actions of the records left
  // The watermark RecoveryRepository::PruneArchive or PruneAudit raised (0: none).
  std::function<int64_t()> archive_pruned_before;
  std::function<int64_t()> audit_pruned_before;
  std::shared_ptr<void> owner;  // keeps the implementation and its files alive
};

struct OutboxImpl {
  std::string name;
  // The implementation stamps times with `clock` (its Now() is the test's).
  std::function<OutboxUnderTest(ManualClock& clock)> make;
};

inline void PrintTo(const OutboxImpl& impl, std::ostream* os) {
  *os << impl.name;
}

inline std::string OutboxImplName(const ::testing::TestParamInfo<OutboxImpl>& info) {
  return info.param.name;
}

struct InboxUnderTest {
  ProcessedLog* log = nullptr;
  // Records `message_id` as processed at `processed_at_ms`.
  std::function<void(const std::string& message_id, int64_t processed_at_ms)> add;
  std::function<int64_t()> count;  // ids kept
  std::function<bool(const std::string&)> has;
  std::shared_ptr<void> owner;
};

struct InboxImpl {
  std::string name;
  std::function<InboxUnderTest()> make;
};

inline void PrintTo(const InboxImpl& impl, std::ostream* os) {
  *os << impl.name;
}
inline std::string InboxImplName(const ::testing::TestParamInfo<InboxImpl>& info) {
  return info.param.name;
}

}  // namespace outbox::testing
