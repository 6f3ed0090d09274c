#include "shared/sqlite/sqlite_file.h"

#include <gtest/gtest.h>

namespace outbox {
namespace {

TEST(SqliteFileTest, ParsesDurability) {
  EXPECT_EQ(*ParseDurability("full"), Durability::kFull);
  EXPECT_EQ(*ParseDurability("NORMAL"), Durability::kNormal);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseDurability("fast").status()));
}

}  // namespace
}  // namespace outbox
