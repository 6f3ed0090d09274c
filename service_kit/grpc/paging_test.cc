#include "service_kit/grpc/paging.h"

#include <gtest/gtest.h>

#include "shared/base/internal/page.h"

namespace outbox {
namespace {

TEST(PagingTest, DefaultsCapsAndRejectsForeignTokens) {
  EXPECT_EQ(ParsePageRequest(0, "")->limit, 100);
  EXPECT_EQ(ParsePageRequest(5000, "")->limit, 1000);
  EXPECT_EQ(ParsePageRequest(10, "42")->after_id, 42);
  EXPECT_TRUE(absl::IsInvalidArgument(ParsePageRequest(-1, "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParsePageRequest(10, "abc").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParsePageRequest(10, "-3").status()));
  EXPECT_EQ(NextPageToken(0), "");
  EXPECT_EQ(NextPageToken(7), "7");
}

TEST(PageTest, TheExtraRowOnlyTellsThatAnotherPageFollows) {
  auto id = [](int v) { return static_cast<int64_t>(v); };
  Page<int> full = MakePage<int>({1, 2, 3}, 2, id);
  EXPECT_EQ(full.items, (std::vector<int>{1, 2}));
  EXPECT_EQ(full.next_cursor, 2);
  Page<int> last = MakePage<int>({5, 6}, 2, id);
  EXPECT_EQ(last.items.size(), 2u);
  EXPECT_EQ(last.next_cursor, 0);
}

}  // namespace
}  // namespace outbox
