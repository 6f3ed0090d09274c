#include "client/sharded_payment_stub.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/channel.h"
#include "client/request.h"
#include "service_kit/shard_of_payment.h"
#include "shared/testing/status_matchers.h"

namespace outbox::client {
namespace {

using payment::v1::CreatePaymentRequest;
using payment::v1::CreatePaymentResponse;
using payment::v1::GetPaymentRequest;
using payment::v1::ListPaymentsRequest;
using payment::v1::ListPaymentsResponse;
using payment::v1::Payment;

// One shard: answers sync calls from what it was given, records what it got.
// Its listing pages by one payment with tokens "1", "2", ...
class FakeShard final : public PaymentStubInterface {
 public:
  FakeShard(int index, std::vector<std::string> ids) : index_(index), ids_(std::move(ids)) {}

  grpc::Status CreatePayment(grpc::ClientContext*, const CreatePaymentRequest& request,
                             CreatePaymentResponse* response) override {
    keys.push_back(request.idempotency_key());
    response->mutable_payment()->set_payment_id(PaymentIdPrefix(index_, 2) +
                                                request.idempotency_key());
    return grpc::Status::OK;
  }
  grpc::Status GetPayment(grpc::ClientContext*, const GetPaymentRequest& request,
                          Payment* response) override {
    gets.push_back(request.payment_id());
    response->set_payment_id(request.payment_id());
    return grpc::Status::OK;
  }
  grpc::Status ListPayments(grpc::ClientContext*, const ListPaymentsRequest& request,
                            ListPaymentsResponse* response) override {
    tokens.push_back(request.page_token());
    size_t at = 0;
    if (!request.page_token().empty()) at = std::stoul(request.page_token());
    if (at < ids_.size()) response->add_payments()->set_payment_id(ids_[at]);
    if (at + 1 < ids_.size()) response->set_next_page_token(std::to_string(at + 1));
    return grpc::Status::OK;
  }

  std::vector<std::string> keys, gets, tokens;

 private:
  using Create = grpc::ClientAsyncResponseReaderInterface<CreatePaymentResponse>;
  using Get = grpc::ClientAsyncResponseReaderInterface<Payment>;
  using List = grpc::ClientAsyncResponseReaderInterface<ListPaymentsResponse>;
  Create* AsyncCreatePaymentRaw(grpc::ClientContext*, const CreatePaymentRequest&,
                                grpc::CompletionQueue*) override {
    return nullptr;
  }
  Create* PrepareAsyncCreatePaymentRaw(grpc::ClientContext*, const CreatePaymentRequest&,
                                       grpc::CompletionQueue*) override {
    return nullptr;
  }
  Get* AsyncGetPaymentRaw(grpc::ClientContext*, const GetPaymentRequest&,
                          grpc::CompletionQueue*) override {
    return nullptr;
  }
  Get* PrepareAsyncGetPaymentRaw(grpc::ClientContext*, const GetPaymentRequest&,
                                 grpc::CompletionQueue*) override {
    return nullptr;
  }
  List* AsyncListPaymentsRaw(grpc::ClientContext*, const ListPaymentsRequest&,
                             grpc::CompletionQueue*) override {
    return nullptr;
  }
  List* PrepareAsyncListPaymentsRaw(grpc::ClientContext*, const ListPaymentsRequest&,
                                    grpc::CompletionQueue*) override {
    return nullptr;
  }

  const int index_;
  const std::vector<std::string> ids_;
};

struct TwoShards {
  FakeShard* shard[2];
  std::unique_ptr<ShardedPaymentStub> stub;
};

TwoShards MakeTwoShards(std::vector<std::string> ids0 = {}, std::vector<std::string> ids1 = {}) {
  TwoShards t;
  auto a = std::make_unique<FakeShard>(0, std::move(ids0));
  auto b = std::make_unique<FakeShard>(1, std::move(ids1));
  t.shard[0] = a.get();
  t.shard[1] = b.get();
  std::vector<std::unique_ptr<PaymentStubInterface>> stubs;
  stubs.push_back(std::move(a));
  stubs.push_back(std::move(b));
  t.stub = std::make_unique<ShardedPaymentStub>(std::move(stubs));
  return t;
}

TEST(PaymentShardsClientTest, SplitsAddressesInOrder) {
  EXPECT_EQ(SplitAddresses("a:1,b:2"), (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(SplitAddresses("a:1"), (std::vector<std::string>{"a:1"}));
  EXPECT_TRUE(SplitAddresses("").empty());
}

TEST(PaymentShardsClientTest, EachCreateGoesToItsKeysShardEveryTime) {
  TwoShards t = MakeTwoShards();
  for (int round = 0; round < 2; ++round) {  // a retry lands where the first try did
    for (int i = 0; i < 200; ++i) {
      grpc::ClientContext ctx;
      CreatePaymentResponse resp;
      const CreatePaymentRequest req = PaymentRequest("shard-test-", i, "");
      ASSERT_OK(FromGrpc(t.stub->CreatePayment(&ctx, req, &resp), "CreatePayment"));
      EXPECT_EQ(ShardOfPaymentId(resp.payment().payment_id()),
                ShardOfKey(req.idempotency_key(), 2));
    }
  }
  for (int s = 0; s < 2; ++s) {
    EXPECT_GT(t.shard[s]->keys.size(), 100u) << s;  // both used, about half each
    for (const std::string& key : t.shard[s]->keys) EXPECT_EQ(ShardOfKey(key, 2), s) << key;
  }
}

TEST(PaymentShardsClientTest, GetGoesToTheShardTheIdNames) {
  TwoShards t = MakeTwoShards();
  for (const char* id : {"s1-abc", "s0-def", "plain-uuid", "s7-unknown"}) {
    grpc::ClientContext ctx;
    Payment p;
    GetPaymentRequest req;
    req.set_payment_id(id);
    ASSERT_OK(FromGrpc(t.stub->GetPayment(&ctx, req, &p), "GetPayment")) << id;
  }
  EXPECT_EQ(t.shard[0]->gets, (std::vector<std::string>{"s0-def", "plain-uuid", "s7-unknown"}));
  EXPECT_EQ(t.shard[1]->gets, (std::vector<std::string>{"s1-abc"}));
}

TEST(PaymentShardsClientTest, ListingWalksEveryShardBehindOneToken) {
  TwoShards t = MakeTwoShards({"s0-a", "s0-b"}, {"s1-c"});
  std::vector<std::string> seen;
  ListPaymentsRequest req;
  int pages = 0;
  do {
    grpc::ClientContext ctx;
    ListPaymentsResponse resp;
    ASSERT_OK(FromGrpc(t.stub->ListPayments(&ctx, req, &resp), "ListPayments"));
    for (const Payment& p : resp.payments()) seen.push_back(p.payment_id());
    req.set_page_token(resp.next_page_token());
    ASSERT_LT(++pages, 10);
  } while (!req.page_token().empty());
  EXPECT_EQ(seen, (std::vector<std::string>{"s0-a", "s0-b", "s1-c"}));
  EXPECT_EQ(t.shard[0]->tokens, (std::vector<std::string>{"", "1"}));
  EXPECT_EQ(t.shard[1]->tokens, (std::vector<std::string>{""}));
}

TEST(PaymentShardsClientTest, AnEmptyShardStillLeadsToTheNext) {
  TwoShards t = MakeTwoShards({}, {"s1-c"});
  grpc::ClientContext ctx;
  ListPaymentsResponse resp;
  ASSERT_OK(FromGrpc(t.stub->ListPayments(&ctx, {}, &resp), "ListPayments"));
  EXPECT_EQ(resp.payments_size(), 0);
  EXPECT_EQ(resp.next_page_token(), "1/");
}

TEST(PaymentShardsClientTest, AForeignTokenIsInvalid) {
  TwoShards t = MakeTwoShards({"s0-a"});
  for (const char* token : {"abc", "2/x", "-1/x"}) {
    grpc::ClientContext ctx;
    ListPaymentsRequest req;
    req.set_page_token(token);
    ListPaymentsResponse resp;
    EXPECT_EQ(t.stub->ListPayments(&ctx, req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << token;
  }
}

}  // namespace
}  // namespace outbox::client
