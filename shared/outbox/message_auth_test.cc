#include "shared/outbox/message_auth.h"

#include <gtest/gtest.h>

#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

const char kOld[] = "old 0123456789abcdef0123456789abcdef";
const char kNew[] = "new fedcba9876543210fedcba9876543210";

MessageKeys Keys(const std::string& text) {
  auto keys = MessageKeys::Parse(text);
  EXPECT_OK(keys);
  return *std::move(keys);
}

OutgoingMessage Event() {
  OutgoingMessage m{"PAY_QUEUE", "m-1", "body bytes", "ACC_QUEUE", "PaymentCreated", "", ""};
  m.shard_key = "pay-1";
  return m;
}

// What the consumer receives when `m` is published signed with `keys`.
Delivery Received(const OutgoingMessage& m, const MessageKeys* keys) {
  Delivery d;
  d.message_id = m.message_id;
  d.reply_to = m.reply_to;
  d.type = m.type;
  d.body = m.body;
  d.shard_key = m.shard_key;
  if (keys != nullptr) d.signature = keys->Sign(m);
  return d;
}

TEST(MessageKeysTest, ParsesKeysInOrderIgnoringCommentsAndBlankLines) {
  MessageKeys keys = Keys(std::string("# rotation in progress\n\n") + kNew + "\n" + kOld + "\n");
  EXPECT_EQ(keys.signing_key_id(), "new");
  EXPECT_EQ(keys.key_ids(), (std::vector<std::string>{"new", "old"}));
}

TEST(MessageKeysTest, RejectsBadFilesNamingTheLineButNeverTheSecret) {
  for (const std::string& text :
       {std::string(""), std::string("# only a comment\n"), std::string("k1 short-secret\n"),
        std::string("k1\n"), std::string("k1 a b\n"),
        std::string("bad/id 0123456789abcdef0123456789abcdef\n"),
        std::string(kOld) + "\n" + kOld + "\n"}) {
    auto keys = MessageKeys::Parse(text);
    EXPECT_THAT(keys,
                StatusIs(absl::StatusCode::kInvalidArgument, Not(HasSubstr("0123456789abcdef"))))
        << text;
  }
}

TEST(MessageKeysTest, ASignedMessageVerifies) {
  MessageKeys keys = Keys(kOld);
  const Delivery d = Received(Event(), &keys);
  EXPECT_EQ(d.signature.substr(0, 4), "old:");
  EXPECT_EQ(d.signature.size(), 4u + 64u);
  EXPECT_OK(keys.Verify(d));
}

TEST(MessageKeysTest, AnyChangeToWhatTheConsumerActsOnBreaksTheSignature) {
  MessageKeys keys = Keys(kOld);
  const Delivery good = Received(Event(), &keys);
  std::vector<Delivery> tampered(7, good);
  tampered[0].body += "x";
  tampered[1].message_id = "m-2";
  tampered[2].reply_to = "attacker-queue";
  tampered[3].type = "Other";
  // Bytes moved between fields: length prefixes keep them apart.
  tampered[4].reply_to = "ACC_QUEUEbody bytes";
  tampered[4].body = "";
  // The shard key picks the accounting shard: another one (or none) would
  // send a replay where the payment's dedup record is not.
  tampered[5].shard_key = "pay-2";
  tampered[6].shard_key = "";
  for (const Delivery& d : tampered) {
    absl::Status s = keys.Verify(d);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(s.message(), "bad signature (key 'old')");
  }
}

TEST(MessageKeysTest, AShardKeyAddedToAMessageSignedWithoutOneBreaksTheSignature) {
  MessageKeys keys = Keys(kOld);
  OutgoingMessage m = Event();
  m.shard_key.clear();
  Delivery d = Received(m, &keys);
  EXPECT_OK(keys.Verify(d));
  d.shard_key = "pay-1";
  EXPECT_EQ(keys.Verify(d).code(), absl::StatusCode::kUnauthenticated);
}

TEST(MessageKeysTest, UnsignedMalformedAndUnknownKeysAreRefused) {
  MessageKeys keys = Keys(kOld);
  Delivery d = Received(Event(), nullptr);
  EXPECT_EQ(keys.Verify(d).message(), "unsigned message");
  d.signature = "old:xyz";
  EXPECT_EQ(keys.Verify(d).message(), "malformed signature");
  d.signature = "no-colon";
  EXPECT_EQ(keys.Verify(d).message(), "malformed signature");
  MessageKeys other = Keys(kNew);
  d = Received(Event(), &other);
  EXPECT_EQ(keys.Verify(d).message(), "unknown key id 'new'");
  // The same key id with another secret: forged.
  MessageKeys impostor = Keys("old ffffffffffffffffffffffffffffffffffff");
  d = Received(Event(), &impostor);
  EXPECT_EQ(keys.Verify(d).message(), "bad signature (key 'old')");
}

TEST(MessageKeysTest, DuringARotationBothKeysAreAcceptedAndTheNewOneSigns) {
  MessageKeys before = Keys(kOld);                                // step 0
  MessageKeys accepting = Keys(std::string(kOld) + "\n" + kNew);  // step 1: new accepted
  MessageKeys switched = Keys(std::string(kNew) + "\n" + kOld);   // step 2: new signs
  MessageKeys after = Keys(kNew);                                 // step 3: old removed
  const Delivery by_old = Received(Event(), &before);
  const Delivery by_new = Received(Event(), &switched);
  EXPECT_EQ(by_new.signature.substr(0, 4), "new:");
  for (const MessageKeys* k : {&accepting, &switched}) {
    EXPECT_OK(k->Verify(by_old));
    EXPECT_OK(k->Verify(by_new));
  }
  // Why step 1 comes first everywhere:
  EXPECT_THAT(before.Verify(by_new),
              StatusIs(absl::StatusCode::kUnauthenticated, "unknown key id 'new'"));
  // Why old messages drain before step 3:
  EXPECT_THAT(after.Verify(by_old),
              StatusIs(absl::StatusCode::kUnauthenticated, "unknown key id 'old'"));
}

TEST(SigningPublisherTest, SignsWithKeysAndPassesThroughWithout) {
  MessageKeys keys = Keys(kOld);
  testing::FakePublisher broker;
  ASSERT_OK(broker.Connect());
  SigningPublisher signing(broker, &keys);
  ASSERT_OK(signing.Publish(Event()));
  SigningPublisher plain(broker, nullptr);
  ASSERT_OK(plain.Publish(Event()));
  ASSERT_EQ(broker.published.size(), 2u);
  EXPECT_EQ(broker.published[0].signature, keys.Sign(Event()));
  EXPECT_EQ(broker.published[1].signature, "");
  EXPECT_OK(CheckSignature(&keys, Received(broker.published[0], &keys)));
  EXPECT_OK(CheckSignature(nullptr, Received(broker.published[1], nullptr)));
}

TEST(ForwardTest, ARedrivenMessageKeepsItsOwnSignatureAndHeaders) {
  Delivery d;
  d.message_id = "m-1";
  d.body = "forged";
  d.signature = "old:" + std::string(64, '0');
  d.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  OutgoingMessage out = Forward(d, "PAY_QUEUE");
  EXPECT_EQ(out.topic, "PAY_QUEUE");
  EXPECT_EQ(out.signature, d.signature);
  EXPECT_EQ(out.traceparent, d.traceparent);
  EXPECT_EQ(out.body, "forged");
}

}  // namespace
}  // namespace outbox
