#include "tools/outboxctl/render.h"

#include <gtest/gtest.h>

namespace outbox::ctl {
namespace {

TEST(RenderTest, TableColumnsAreAlignedWithoutTrailingBlanks) {
  EXPECT_EQ(Table({"A", "LONG_HEADER", "C"}, {{"xxxx", "y", "z"}, {"1", "2", ""}}),
            "A     LONG_HEADER  C\n"
            "xxxx  y            z\n"
            "1     2\n");
  EXPECT_EQ(Fields({{"a", "1"}, {"long_name", "2"}}), "a          1\nlong_name  2\n");
}

TEST(RenderTest, StatsShowCountsLeaseAndHold) {
  ::ops::v1::Stats s;
  s.set_sending(3);
  s.set_failed(2);
  s.set_oldest_sending_age_seconds(1.5);
  s.set_lease_holder("r1");
  s.set_lease_held(true);
  s.set_delivery_hold("consumer_down");
  const std::string out = RenderStats(s);
  EXPECT_NE(out.find("sending                 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("failed                  2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("oldest_sending_age      1.5s\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lease_holder            r1 (this instance)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("delivery_hold           consumer_down\n"), std::string::npos) << out;
}

TEST(RenderTest, MessagesAsATableWithACount) {
  google::protobuf::RepeatedPtrField<::ops::v1::OutboxMessage> rows;
  auto* m = rows.Add();
  m->set_message_id("m-1");
  m->set_biz_key("p-1");
  m->set_status(::ops::v1::FAILED);
  m->set_attempts(2);
  m->set_max_attempts(2);
  m->set_last_error("nack\nfrom broker");
  const std::string out = RenderMessages("FAILED", rows, /*more=*/true);
  EXPECT_EQ(out,
            "MESSAGE_ID  PAYMENT_ID  STATUS  ATTEMPTS  NEXT_RETRY_AT  LAST_ERROR\n"
            "m-1         p-1         FAILED  2 of 2    -              nack from broker\n"
            "1 FAILED row(s); more remain (raise --limit)\n");
  EXPECT_EQ(RenderMessages("SENT", {}, false), "no SENT rows\n");
}

TEST(RenderTest, OneMessageShowsItsTrace) {
  ::ops::v1::OutboxMessage m;
  m.set_message_id("m-1");
  m.set_trace_id("4bf92f3577b34da6a3ce929d0e0e4736");
  m.set_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  const std::string out = RenderMessage(m);
  EXPECT_NE(out.find("\ntrace_id         4bf92f3577b34da6a3ce929d0e0e4736\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("\nreply_to         -\n"), std::string::npos) << out;
}

TEST(RenderTest, TimesAreUtcWithMilliseconds) {
  google::protobuf::Timestamp t;
  t.set_seconds(1767323045);
  t.set_nanos(678000000);
  EXPECT_EQ(TimeText(t, true), "2026-01-02T03:04:05.678Z");
  EXPECT_EQ(TimeText(t, false), "-");
}

TEST(RenderTest, JsonUsesProtoFieldNamesAndShowsZeros) {
  ::ops::v1::Stats s;
  s.set_sending(3);
  const std::string json = ToJson(s);
  EXPECT_NE(json.find("\"sending\":\"3\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"failed\":\"0\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"lease_held\":false"), std::string::npos) << json;
  EXPECT_EQ(json.back(), '\n');
}

TEST(RenderTest, DeadLettersAndRedrives) {
  ::ops::v1::ListDeadLettersResponse r;
  auto* d = r.add_messages();
  d->set_message_id("m-1");
  d->set_type("PaymentCreated");
  d->set_body("12345");
  r.set_total(7);
  EXPECT_EQ(RenderDeadLetters("PAY_QUEUE", r),
            "MESSAGE_ID  TYPE            BYTES\n"
            "m-1         PaymentCreated  5\n"
            "7 message(s) dead-lettered from PAY_QUEUE, 1 shown\n");
  ::ops::v1::RedriveFailedResponse f;
  f.set_count(4);
  f.set_dry_run(true);
  EXPECT_EQ(RenderRedriveFailed(f), "4 FAILED row(s) would be re-driven (dry run)\n");
}

TEST(RenderTest, AuditShowsTheReason) {
  ::ops::v1::ListAuditResponse r;
  auto* a = r.add_records();
  a->set_id(3);
  a->set_actor("alice");
  a->set_action("acknowledge_group");
  a->set_target("0123456789ab");
  a->set_rows(4);
  a->set_outcome("ok");
  a->set_reason("known: GBP is not kept");
  EXPECT_EQ(RenderAudit(r),
            "ID  AT  ACTOR  ACTION             TARGET        DRY_RUN  ROWS  OUTCOME  REASON\n"
            "3   -   alice  acknowledge_group  0123456789ab  no       4     ok       known: GBP is "
            "not kept\n");
}

}  // namespace
}  // namespace outbox::ctl
