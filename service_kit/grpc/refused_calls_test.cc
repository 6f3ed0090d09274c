#include "service_kit/grpc/refused_calls.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/testing/manual_clock.h"

namespace outbox {
namespace {

using ::outbox::testing::ManualClock;

class RefusedCallLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogSink([this](const LogRecord& r) {
      if (r.event == "call_refused") lines_.emplace_back(r.line);
    });
  }
  void TearDown() override { SetLogSink(nullptr); }
  void Refuse(RefusedCallLog& log, const std::string& method, const std::string& peer) {
    log.Refused(LogLevel::kWarning, method, peer, "UNAUTHENTICATED", "missing token");
  }

  ManualClock clock_;
  std::vector<std::string> lines_;
};

// A caller that is refused again and again, on new connections each time,
// writes one line a minute, which counts the calls not logged since.
TEST_F(RefusedCallLogTest, OneLineAMinutePerPeerAndMethodWithTheRestCounted) {
  RefusedCallLog log(clock_, absl::Minutes(1));
  for (int i = 0; i < 1000; ++i) {
    Refuse(log, "/payment.v1.PaymentService/CreatePayment",
           absl::StrCat("ipv4:10.0.0.7:", 40000 + i));
  }
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find("unlogged=0"), std::string::npos) << lines_[0];
  EXPECT_NE(lines_[0].find("peer=ipv4:10.0.0.7:40000"), std::string::npos) << lines_[0];
  clock_.Advance(absl::Seconds(59));
  Refuse(log, "/payment.v1.PaymentService/CreatePayment", "ipv4:10.0.0.7:50000");
  EXPECT_EQ(lines_.size(), 1u);
  clock_.Advance(absl::Seconds(1));
  Refuse(log, "/payment.v1.PaymentService/CreatePayment", "ipv4:10.0.0.7:50001");
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_NE(lines_[1].find("unlogged=1000"), std::string::npos) << lines_[1];
}

TEST_F(RefusedCallLogTest, AnotherMethodOrPeerHasALineOfItsOwn) {
  RefusedCallLog log(clock_);
  Refuse(log, "/a", "ipv4:10.0.0.7:1");
  Refuse(log, "/b", "ipv4:10.0.0.7:2");
  Refuse(log, "/a", "ipv4:10.0.0.8:3");
  Refuse(log, "/a", "ipv6:[::1]:4");
  Refuse(log, "/a", "ipv6:[::1]:5");
  EXPECT_EQ(lines_.size(), 4u);
}

// Many peers cannot grow the log's memory without bound: past max_keys, the
// new ones share one line a minute.
TEST_F(RefusedCallLogTest, PastItsBoundNewPeersShareOneLine) {
  RefusedCallLog log(clock_, absl::Minutes(1), /*max_keys=*/2);
  for (int i = 0; i < 100; ++i)
    Refuse(log, "/a", absl::StrCat("ipv4:10.0.", i / 250, ".", i % 250, ":1"));
  EXPECT_EQ(lines_.size(), 3u);  // two peers, then the others together
  clock_.Advance(absl::Minutes(1));
  Refuse(log, "/a", "ipv4:10.1.0.1:1");  // quiet keys are forgotten: room again
  Refuse(log, "/a", "ipv4:10.1.0.2:1");
  EXPECT_EQ(lines_.size(), 5u);
  EXPECT_NE(lines_[3].find("unlogged=0"), std::string::npos) << lines_[3];
}

TEST(RefusedCallLogPeerTest, ThePeerAddressLeavesThePortOut) {
  EXPECT_EQ(RefusedCallLog::PeerAddress("ipv4:10.0.0.7:51234"), "ipv4:10.0.0.7");
  EXPECT_EQ(RefusedCallLog::PeerAddress("ipv6:[::1]:51234"), "ipv6:[::1]");
  EXPECT_EQ(RefusedCallLog::PeerAddress("ipv6:[fe80::1%eth0]:1"), "ipv6:[fe80::1%eth0]");
  EXPECT_EQ(RefusedCallLog::PeerAddress("unix:/run/payment.sock"), "unix:/run/payment.sock");
  EXPECT_EQ(RefusedCallLog::PeerAddress(""), "");
}

}  // namespace
}  // namespace outbox
