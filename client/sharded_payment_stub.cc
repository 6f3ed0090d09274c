#include "client/sharded_payment_stub.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service_kit/shard_of_payment.h"

namespace outbox::client {
namespace {

// "<shard>/<inner>" -> shard, inner; false for a token that is not ours.
bool ParseToken(const std::string& token, int shards, int* shard, std::string* inner) {
  *shard = 0;
  inner->clear();
  if (token.empty()) return true;
  const size_t slash = token.find('/');
  if (slash == std::string::npos || !absl::SimpleAtoi(token.substr(0, slash), shard) ||
      *shard < 0 || *shard >= shards) {
    return false;
  }
  *inner = token.substr(slash + 1);
  return true;
}

}  // namespace

std::vector<std::string> SplitAddresses(absl::string_view addresses) {
  return absl::StrSplit(addresses, ',', absl::SkipEmpty());
}

int ShardOfRequest(const payment::v1::CreatePaymentRequest& request, int shards) {
  return ShardOfKey(request.idempotency_key(), shards);
}

ShardedPaymentStub::ShardedPaymentStub(std::vector<std::unique_ptr<PaymentStubInterface>> shards)
    : shards_(std::move(shards)) {}

PaymentStubInterface& ShardedPaymentStub::ForPaymentId(const std::string& payment_id) {
  // An id without a shard prefix (from before sharding) is shard 0's; one
  // naming a shard we do not know goes there too, to get its NOT_FOUND.
  const std::optional<int> named = ShardOfPaymentId(payment_id);
  return named && *named < shard_count() ? shard(*named) : shard(0);
}

grpc::Status ShardedPaymentStub::CreatePayment(grpc::ClientContext* context,
                                               const payment::v1::CreatePaymentRequest& request,
                                               payment::v1::CreatePaymentResponse* response) {
  return shard(ShardOfRequest(request, shard_count())).CreatePayment(context, request, response);
}

grpc::Status ShardedPaymentStub::GetPayment(grpc::ClientContext* context,
                                            const payment::v1::GetPaymentRequest& request,
                                            payment::v1::Payment* response) {
  return ForPaymentId(request.payment_id()).GetPayment(context, request, response);
}

grpc::Status ShardedPaymentStub::ListPayments(grpc::ClientContext* context,
                                              const payment::v1::ListPaymentsRequest& request,
                                              payment::v1::ListPaymentsResponse* response) {
  int index = 0;
  payment::v1::ListPaymentsRequest inner = request;
  std::string inner_token;
  if (!ParseToken(request.page_token(), shard_count(), &index, &inner_token)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "page_token: not a token of this sharded listing");
  }
  inner.set_page_token(inner_token);
  grpc::Status s = shard(index).ListPayments(context, inner, response);
  if (!s.ok()) return s;
  if (!response->next_page_token().empty()) {
    response->set_next_page_token(absl::StrCat(index, "/", response->next_page_token()));
  } else if (index + 1 < shard_count()) {
    response->set_next_page_token(absl::StrCat(index + 1, "/"));
  }
  return s;
}

grpc::ClientAsyncResponseReaderInterface<payment::v1::CreatePaymentResponse>*
ShardedPaymentStub::AsyncCreatePaymentRaw(grpc::ClientContext* context,
                                          const payment::v1::CreatePaymentRequest& request,
                                          grpc::CompletionQueue* cq) {
  return shard(ShardOfRequest(request, shard_count()))
      .AsyncCreatePayment(context, request, cq)
      .release();
}

grpc::ClientAsyncResponseReaderInterface<payment::v1::CreatePaymentResponse>*
ShardedPaymentStub::PrepareAsyncCreatePaymentRaw(grpc::ClientContext* context,
                                                 const payment::v1::CreatePaymentRequest& request,
                                                 grpc::CompletionQueue* cq) {
  return shard(ShardOfRequest(request, shard_count()))
      .PrepareAsyncCreatePayment(context, request, cq)
      .release();
}

grpc::ClientAsyncResponseReaderInterface<payment::v1::Payment>*
ShardedPaymentStub::AsyncGetPaymentRaw(grpc::ClientContext* context,
                                       const payment::v1::GetPaymentRequest& request,
                                       grpc::CompletionQueue* cq) {
  return ForPaymentId(request.payment_id()).AsyncGetPayment(context, request, cq).release();
}

grpc::ClientAsyncResponseReaderInterface<payment::v1::Payment>*
ShardedPaymentStub::PrepareAsyncGetPaymentRaw(grpc::ClientContext* context,
                                              const payment::v1::GetPaymentRequest& request,
                                              grpc::CompletionQueue* cq) {
  return ForPaymentId(request.payment_id()).PrepareAsyncGetPayment(context, request, cq).release();
}

grpc::ClientAsyncResponseReaderInterface<payment::v1::ListPaymentsResponse>*
ShardedPaymentStub::AsyncListPaymentsRaw(grpc::ClientContext* context,
                                         const payment::v1::ListPaymentsRequest& request,
                                         grpc::CompletionQueue* cq) {
  int index = 0;
  std::string inner_token;
  payment::v1::ListPaymentsRequest inner = request;
  if (ParseToken(request.page_token(), shard_count(), &index, &inner_token)) {
    inner.set_page_token(inner_token);
  }
  return shard(index).AsyncListPayments(context, inner, cq).release();
}

grpc::ClientAsyncResponseReaderInterface<payment::v1::ListPaymentsResponse>*
ShardedPaymentStub::PrepareAsyncListPaymentsRaw(grpc::ClientContext* context,
                                                const payment::v1::ListPaymentsRequest& request,
                                                grpc::CompletionQueue* cq) {
  int index = 0;
  std::string inner_token;
  payment::v1::ListPaymentsRequest inner = request;
  if (ParseToken(request.page_token(), shard_count(), &index, &inner_token)) {
    inner.set_page_token(inner_token);
  }
  return shard(index).PrepareAsyncListPayments(context, inner, cq).release();
}

std::unique_ptr<PaymentStubInterface> NewPaymentStub(const std::vector<std::string>& addresses,
                                                     const ChannelSecurity& security) {
  std::vector<std::unique_ptr<PaymentStubInterface>> stubs;
  for (const std::string& a : addresses) {
    stubs.push_back(payment::v1::PaymentService::NewStub(NewChannel(a, security)));
  }
  if (stubs.size() == 1) return std::move(stubs.front());
  return std::make_unique<ShardedPaymentStub>(std::move(stubs));
}

}  // namespace outbox::client
