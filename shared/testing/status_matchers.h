#pragma once

// gMock matchers for absl::Status and absl::StatusOr<T> that say what they
// got when they fail:
//
//   EXPECT_THAT(store.Insert(row), IsOk());
//   ASSERT_THAT(claimed, IsOk());  // a StatusOr: its status
//   EXPECT_THAT(Parse("x"), StatusIs(absl::StatusCode::kInvalidArgument,
//                                    HasSubstr("expected a number")));
//
// A failure prints the status in full ("INVALID_ARGUMENT: ..."), not
// "Value of: s.ok() Actual: false".
#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace outbox::testing {

namespace internal {

inline const absl::Status& GetStatus(const absl::Status& status) {
  return status;
}

template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

class IsOkMatcher {
 public:
  using is_gtest_matcher = void;

  template <typename StatusLike>
  bool MatchAndExplain(const StatusLike& actual, ::testing::MatchResultListener* listener) const {
    const absl::Status& status = GetStatus(actual);
    if (!status.ok()) *listener << "which is " << status.ToString();
    return status.ok();
  }
  void DescribeTo(std::ostream* os) const { *os << "is OK"; }
  void DescribeNegationTo(std::ostream* os) const { *os << "is not OK"; }
};

class StatusIsMatcher {
 public:
  using is_gtest_matcher = void;

  StatusIsMatcher(absl::StatusCode code, ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <typename StatusLike>
  bool MatchAndExplain(const StatusLike& actual, ::testing::MatchResultListener* listener) const {
    const absl::Status& status = GetStatus(actual);
    *listener << "which is " << (status.ok() ? std::string("OK") : status.ToString());
    return status.code() == code_ && message_.Matches(std::string(status.message()));
  }
  void DescribeTo(std::ostream* os) const {
    *os << "has code " << absl::StatusCodeToString(code_) << " and a message that ";
    message_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "has a code other than " << absl::StatusCodeToString(code_) << " or a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  absl::StatusCode code_;
  ::testing::Matcher<const std::string&> message_;
};

}  // namespace internal

// Matches an OK absl::Status, or an absl::StatusOr<T> that holds a value.
inline internal::IsOkMatcher IsOk() {
  return {};
}

// Matches a status (or a StatusOr's status) with this code and a message
// that `message` matches (a string is an exact match; use HasSubstr for a part).
template <typename MessageMatcher>
internal::StatusIsMatcher StatusIs(absl::StatusCode code, MessageMatcher&& message) {
  return internal::StatusIsMatcher(
      code, ::testing::MatcherCast<const std::string&>(std::forward<MessageMatcher>(message)));
}
inline internal::StatusIsMatcher StatusIs(absl::StatusCode code) {
  return internal::StatusIsMatcher(code, ::testing::_);
}

}  // namespace outbox::testing

// Asserts that an expression yielding a status is OK, printing it if not.
#define ASSERT_OK(expr) ASSERT_THAT((expr), ::outbox::testing::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::outbox::testing::IsOk())
