#pragma once

// The contract suites' access to stores on a SQLite file with the library's
// tables (outbox_table.h, inbox.h): everything an OutboxUnderTest or
// InboxUnderTest needs besides the seams themselves. An adopter's contract
// test then only opens its own file and stores:
//
//   OutboxUnderTest MakeRewardsDb(ManualClock& clock) {
//     auto s = std::make_shared<RewardsStores>();   // the file, SqliteOutbox, RecoveryStore
//     ...
//     return SqliteOutboxUnderTest(path, s->outbox.get(), s->recovery.get(), s);
//   }
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "shared/outbox/repository.h"
#include "shared/sqlite/schema.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/testing/under_test.h"

namespace outbox::testing {

// The seams `outbox` and `recovery` (either may be null) on the file at
// `path`, whose rows, archive, audit trail and retention watermarks the
// suite writes and reads on a connection of its own to `path`. `owner`
// keeps the stores alive; an empty result (no seams) when `path` cannot be
// opened, with a test failure.
OutboxUnderTest SqliteOutboxUnderTest(const std::string& path, OutboxRepository* outbox,
                                      RecoveryRepository* recovery, std::shared_ptr<void> owner);

// `log` on `file`, whose inbox the suite writes (Inbox::Record) and reads
// through `file`. `owner` keeps both alive.
InboxUnderTest SqliteInboxUnderTest(SqliteFile& file, ProcessedLog* log,
                                    std::shared_ptr<void> owner);

// Opens `path` with `schema` (OpenSqliteFile) from `openers` threads
// released at the same moment, as processes starting together would; returns
// each opener's status. A schema's upgrade must run once whoever wins.
std::vector<absl::Status> OpenAtOnce(const std::string& path, int openers, const DbSchema& schema);

}  // namespace outbox::testing
