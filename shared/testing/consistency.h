#pragma once

// The consistency check for tests: CheckConsistency and WaitUntilConsistent
// are the library's (shared/sqlite/consistency.h, no GoogleTest), named here
// too, and IsConsistent wraps them for EXPECT_TRUE.
//
//   EXPECT_TRUE(IsConsistent(dir + "/orders.db", dir + "/shipping.db",
//                            {{{"order without its shipment",
//                               "SELECT count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 "
//                               "FROM consumer.shipments s WHERE s.order_id = o.order_id)"}}}));
#include <string>

#include <gtest/gtest.h>

#include "shared/sqlite/consistency.h"

namespace outbox::testing {

using ::outbox::CheckConsistency;
using ::outbox::ConsistencyOptions;
using ::outbox::ConsistencyReport;
using ::outbox::WaitUntilConsistent;

// For EXPECT_TRUE: success when consistent, else the report (or the error).
::testing::AssertionResult IsConsistent(const std::string& producer_db,
                                        const std::string& consumer_db,
                                        const ConsistencyOptions& options = {});

}  // namespace outbox::testing
