#pragma once

// accounting.db's schema versions: vouchers and the ids of processed
// messages. accounting_service creates and upgrades the file.
#include "shared/sqlite/schema.h"

namespace outbox::accounting {

// 1  vouchers, processed_messages
// 2  traceparent on vouchers
// 3  processed_messages_processed_at index (pruning by age)
const DbSchema& AccountingDbSchema();

}  // namespace outbox::accounting
