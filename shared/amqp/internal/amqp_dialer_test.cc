// Failover order and backoff of AmqpDialer against loopback ports where no
// broker listens (bound, not listening: every connect is refused at once).
#include "shared/amqp/internal/amqp_dialer.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

// A loopback port that refuses connections for as long as this lives.
class ClosedPort {
 public:
  ClosedPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
  }
  ~ClosedPort() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(AmqpDialerTest, ARoundTriesEveryNodeOnceThenBacksOff) {
  ClosedPort a, b, c;
  const std::string list =
      absl::StrCat("127.0.0.1:", a.port(), ",127.0.0.1:", b.port(), ",127.0.0.1:", c.port());
  auto url = AmqpUrl::Parse(absl::StrCat("amqp://u:p@", list, "/%2F"));
  ASSERT_OK(url);
  testing::ManualClock clock;
  AmqpDialer dialer(*url, Topology{}, "test", nullptr, clock);

  auto first = dialer.Get();
  ASSERT_TRUE(absl::IsUnavailable(first.status()));
  // One error per node, in the order given, each naming its node.
  const std::string m(first.status().message());
  const size_t at_a = m.find(absl::StrCat("127.0.0.1:", a.port(), ": "));
  const size_t at_b = m.find(absl::StrCat("127.0.0.1:", b.port(), ": "));
  const size_t at_c = m.find(absl::StrCat("127.0.0.1:", c.port(), ": "));
  ASSERT_NE(at_a, std::string::npos) << m;
  ASSERT_NE(at_b, std::string::npos) << m;
  ASSERT_NE(at_c, std::string::npos) << m;
  EXPECT_LT(at_a, at_b);
  EXPECT_LT(at_b, at_c);

  // The backoff (100 ms first) is per round, not per node.
  EXPECT_EQ(dialer.Get().status().message(), "amqp: waiting to reconnect");
  clock.Advance(absl::Milliseconds(99));
  EXPECT_EQ(dialer.Get().status().message(), "amqp: waiting to reconnect");
  clock.Advance(absl::Milliseconds(1));
  auto second = dialer.Get();
  EXPECT_NE(second.status().message(), "amqp: waiting to reconnect");
  EXPECT_NE(std::string(second.status().message()).find(absl::StrCat(":", c.port(), ": ")),
            std::string::npos);
  // Then 200 ms.
  clock.Advance(absl::Milliseconds(199));
  EXPECT_EQ(dialer.Get().status().message(), "amqp: waiting to reconnect");
  clock.Advance(absl::Milliseconds(1));
  EXPECT_NE(dialer.Get().status().message(), "amqp: waiting to reconnect");
}

TEST(AmqpDialerTest, ASingleNodeErrorIsNotPrefixed) {
  ClosedPort a;
  auto url = AmqpUrl::Parse(absl::StrCat("amqp://u:p@127.0.0.1:", a.port(), "/%2F"));
  ASSERT_OK(url);
  testing::ManualClock clock;
  AmqpDialer dialer(*url, Topology{}, "test", nullptr, clock);
  auto r = dialer.Get();
  ASSERT_TRUE(absl::IsUnavailable(r.status()));
  EXPECT_EQ(std::string(r.status().message()).rfind("amqp: cannot connect to 127.0.0.1:", 0), 0u)
      << r.status();
  EXPECT_EQ(dialer.node(), absl::StrCat("127.0.0.1:", a.port()));
}

}  // namespace
}  // namespace outbox
