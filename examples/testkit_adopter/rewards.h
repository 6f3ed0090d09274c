#pragma once

// A rewards program on the outbox library: AwardPoints writes an award and
// its PointsEarned message in one transaction (rewards.db); the ledger
// (ledger.db) books each PointsEarned once, through the library's inbox.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/sqlite/internal/sqlite_outbox.h"
#include "shared/sqlite/schema.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/sqlite/sqlite_message_handler.h"

namespace rewards {

inline constexpr char kQueue[] = "rewards.points";
inline constexpr char kReplies[] = "rewards.points.done";

// rewards.db: awards and the library's outbox tables.
const outbox::DbSchema& RewardsSchema();
// ledger.db: the points each member holds, one row per award, and the inbox.
const outbox::DbSchema& LedgerSchema();

// Awards `points` to `member` under `award_id` (also the message id):
// the award row and its PointsEarned message commit together.
absl::StatusOr<outbox::OutgoingMessage> AwardPoints(outbox::SqliteOutbox& outbox,
                                                    const std::string& award_id,
                                                    const std::string& member, int64_t points);

struct PointsEarned {
  std::string award_id;
  std::string member;
  int64_t points = 0;
};

// Books a PointsEarned into the ledger. Refuses (a business reject) an
// award over kMaxPoints; dead-letters what is not a PointsEarned.
class Ledger final : public outbox::SqliteMessageHandler<PointsEarned> {
 public:
  static constexpr int64_t kMaxPoints = 10'000;
  using SqliteMessageHandler::SqliteMessageHandler;

  absl::StatusOr<PointsEarned> Decode(const outbox::Delivery& d) override;
  std::string BusinessKey(const PointsEarned& m) override { return m.award_id; }
  std::string Rejects(const PointsEarned& m) override;
  absl::StatusOr<std::string> Apply(SQLite::Database& tx, const PointsEarned& m) override;
};

// The points `member` holds in the ledger; -1 if it cannot be read.
int64_t Balance(outbox::SqliteFile& ledger, const std::string& member);

}  // namespace rewards
