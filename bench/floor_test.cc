#include "bench/floor.h"

#include <gtest/gtest.h>

namespace outbox::bench {
namespace {

FloorParts Parts(double grpc, double broker, double sqlite) {
  FloorParts parts;
  parts.grpc.server_us_per_call = grpc;
  parts.grpc.client_us_per_call = 1000;  // the client is not the system's
  parts.broker.us_per_message = broker;
  parts.broker_transient.us_per_message = 1;  // not in the floor
  parts.sqlite.us_per_tx = sqlite;
  return parts;
}

TEST(FloorTest, PaymentIsOneCallTwoMessagesAndTwoCommits) {
  EXPECT_DOUBLE_EQ(FloorPerPayment(Parts(120, 400, 50)), 120 + 2 * 400 + 2 * 50);
}

TEST(FloorTest, PartNotMeasuredLeavesNoFloor) {
  EXPECT_TRUE(std::isnan(FloorPerPayment(Parts(120, NAN, 50))));  // no --broker_pid
}

TEST(FloorTest, CompositionNamesEachPartWithItsFigure) {
  EXPECT_EQ(FloorComposition(Parts(120, 400, 50)),
            "gRPC server 120 µs + 2 x broker 400 µs + 2 x SQLite tx 50 µs");
  EXPECT_EQ(FloorComposition(Parts(120, NAN, 50)),
            "gRPC server 120 µs + 2 x broker n/a + 2 x SQLite tx 50 µs");
}

TEST(TicksTest, TickIIsDueAtStartPlusIOverRate) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  Ticks ticks(200, start);
  EXPECT_EQ(ticks.due(), start);
  ticks.Take();
  EXPECT_EQ(ticks.due(), start + absl::Milliseconds(5));
  for (int i = 0; i < 199; ++i) ticks.Take();
  EXPECT_EQ(ticks.taken(), 200);
  EXPECT_EQ(ticks.due(), start + absl::Seconds(1));  // no drift over many ticks
}

}  // namespace
}  // namespace outbox::bench
