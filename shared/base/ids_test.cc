#include "shared/base/ids.h"

#include <gtest/gtest.h>

#include "shared/testing/sequential_ids.h"

namespace outbox {
namespace {

TEST(IdsTest, UuidsAreVersion4AndDistinct) {
  UuidGenerator g;
  std::string a = g.NewId(), b = g.NewId();
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), 36u);
  EXPECT_EQ(a[14], '4');
  testing::SequentialIds s("x");
  EXPECT_EQ(s.NewId(), "x1");
  EXPECT_EQ(s.NewId(), "x2");
}

}  // namespace
}  // namespace outbox
