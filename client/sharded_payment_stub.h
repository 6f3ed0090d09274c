#pragma once

// Client-side routing over payment shards (docs/deployment.md, Payment shards): a
// CreatePayment goes to the shard its idempotency key hashes to, a
// GetPayment to the shard its payment id names, and ListPayments walks the
// shards one after another behind one page token. A shard answering
// FAILED_PRECONDITION with `outbox-payment-shard-address` means the client's
// list disagrees with the shards' own (order or length): that answer is
// passed on as it is, never retried elsewhere by guesswork.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/channel.h"
#include "payment/v1/payment.grpc.pb.h"

namespace outbox::client {

using PaymentStubInterface = payment::v1::PaymentService::StubInterface;

// "host:port,host:port" -> its addresses, in order (the shard indexes).
std::vector<std::string> SplitAddresses(absl::string_view addresses);

// Which shard of `shards` a request goes to (service_kit/shard_of_payment.h).
int ShardOfRequest(const payment::v1::CreatePaymentRequest& request, int shards);

class ShardedPaymentStub final : public PaymentStubInterface {
 public:
  // `shards[i]` reaches shard i; at least one.
  explicit ShardedPaymentStub(std::vector<std::unique_ptr<PaymentStubInterface>> shards);

  int shard_count() const { return static_cast<int>(shards_.size()); }
  PaymentStubInterface& shard(int index) { return *shards_[static_cast<size_t>(index)]; }

  grpc::Status CreatePayment(grpc::ClientContext* context,
                             const payment::v1::CreatePaymentRequest& request,
                             payment::v1::CreatePaymentResponse* response) override;
  grpc::Status GetPayment(grpc::ClientContext* context,
                          const payment::v1::GetPaymentRequest& request,
                          payment::v1::Payment* response) override;
  // The page token is "<shard>/<that shard's token>"; an empty page may
  // come back where one shard ends, with a token for the next.
  grpc::Status ListPayments(grpc::ClientContext* context,
                            const payment::v1::ListPaymentsRequest& request,
                            payment::v1::ListPaymentsResponse* response) override;

 private:
  PaymentStubInterface& ForPaymentId(const std::string& payment_id);

  // The async forms route Create and Get alike. Their ListPayments cannot
  // rewrite the answer's token: it lists the shard the token names (or the
  // first) with that shard's own tokens; use the sync form to walk them all.
  grpc::ClientAsyncResponseReaderInterface<payment::v1::CreatePaymentResponse>*
  AsyncCreatePaymentRaw(grpc::ClientContext* context,
                        const payment::v1::CreatePaymentRequest& request,
                        grpc::CompletionQueue* cq) override;
  grpc::ClientAsyncResponseReaderInterface<payment::v1::CreatePaymentResponse>*
  PrepareAsyncCreatePaymentRaw(grpc::ClientContext* context,
                               const payment::v1::CreatePaymentRequest& request,
                               grpc::CompletionQueue* cq) override;
  grpc::ClientAsyncResponseReaderInterface<payment::v1::Payment>* AsyncGetPaymentRaw(
      grpc::ClientContext* context, const payment::v1::GetPaymentRequest& request,
      grpc::CompletionQueue* cq) override;
  grpc::ClientAsyncResponseReaderInterface<payment::v1::Payment>* PrepareAsyncGetPaymentRaw(
      grpc::ClientContext* context, const payment::v1::GetPaymentRequest& request,
      grpc::CompletionQueue* cq) override;
  grpc::ClientAsyncResponseReaderInterface<payment::v1::ListPaymentsResponse>* AsyncListPaymentsRaw(
      grpc::ClientContext* context, const payment::v1::ListPaymentsRequest& request,
      grpc::CompletionQueue* cq) override;
  grpc::ClientAsyncResponseReaderInterface<payment::v1::ListPaymentsResponse>*
  PrepareAsyncListPaymentsRaw(grpc::ClientContext* context,
                              const payment::v1::ListPaymentsRequest& request,
                              grpc::CompletionQueue* cq) override;

  std::vector<std::unique_ptr<PaymentStubInterface>> shards_;
};

// A stub over `addresses` (each on a channel of its own): the plain stub for
// one address, a ShardedPaymentStub for several.
std::unique_ptr<PaymentStubInterface> NewPaymentStub(const std::vector<std::string>& addresses,
                                                     const ChannelSecurity& security = {});

}  // namespace outbox::client
