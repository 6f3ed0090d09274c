#include "shared/base/internal/ids.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

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

TEST(IdsTest, TimeOrderedUuidsAreVersion7AndIncrease) {
  TimeOrderedUuidGenerator g;
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::string previous = g.NewId();
  for (int i = 0; i < 20000; ++i) {  // many in one millisecond: the counter
    std::string id = g.NewId();
    ASSERT_EQ(id.size(), 36u);
    ASSERT_EQ(id[14], '7') << id;
    ASSERT_NE(std::string("89ab").find(id[19]), std::string::npos) << id;  // variant 10
    ASSERT_LT(previous, id);  // as strings: what an index on the TEXT column sees
    previous = id;
  }
  // The first 48 bits are the time in Unix milliseconds.
  const std::string first = g.NewId();
  const uint64_t ms = std::stoull(first.substr(0, 8) + first.substr(9, 4), nullptr, 16);
  EXPECT_GE(ms, static_cast<uint64_t>(now_ms));
  EXPECT_LT(ms, static_cast<uint64_t>(now_ms) + 60000);
}

TEST(IdsTest, TimeOrderedUuidsNeverGoBackWithTheClock) {
  TimeOrderedUuidGenerator g;
  const std::string late = g.NewIdAt(2000000000000);
  const std::string earlier_clock = g.NewIdAt(1999999999000);  // NTP stepped back a second
  EXPECT_LT(late, earlier_clock);
  // 4,096 ids in one millisecond overflow the counter into the next one.
  std::string previous = g.NewIdAt(2100000000000);
  for (int i = 0; i < 5000; ++i) {
    std::string id = g.NewIdAt(2100000000000);
    ASSERT_LT(previous, id);
    previous = id;
  }
  EXPECT_EQ(previous.substr(0, 13), g.NewIdAt(2100000000000 + 1).substr(0, 13))
      << "the overflow borrowed the next millisecond: its ids continue there";
}

}  // namespace
}  // namespace outbox
