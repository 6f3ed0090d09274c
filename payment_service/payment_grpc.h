#pragma once

// gRPC edge of the payment service: protobuf in, domain calls, protobuf out.
// CreatePayment uses gRPC's callback API: the handler queues the request with
// the producer and returns; the producer's writer thread finishes the call
// right after the group commit, so no thread is parked per call in flight. The reads stay
// synchronous (they run in the handler thread against the store).
#include "payment/v1/payment.grpc.pb.h"
#include "payment_service/payment_store.h"
#include "payment_service/shard_guard.h"
#include "service_kit/money.h"

namespace outbox::payment {

class PaymentServiceImpl final
    : public ::payment::v1::PaymentService::WithCallbackMethod_CreatePayment<
          ::payment::v1::PaymentService::Service> {
 public:
  // `max_amount_minor`: the largest amount a payment may carry; `shard`:
  // which payments are this instance's (all by default, shard_guard.h). The
  // API token is checked before any handler runs (Serving, call_gate.h).
  // `creator` and `store` are one store's (SQLite's or PostgreSQL's).
  PaymentServiceImpl(PaymentCreator& creator, PaymentReads& store,
                     int64_t max_amount_minor = kDefaultMaxAmountMinor, ShardGuard shard = {})
      : creator_(creator),
        store_(store),
        max_amount_minor_(max_amount_minor),
        shard_(std::move(shard)) {}

  grpc::ServerUnaryReactor* CreatePayment(grpc::CallbackServerContext* context,
                                          const ::payment::v1::CreatePaymentRequest* request,
                                          ::payment::v1::CreatePaymentResponse* response) override;
  grpc::Status GetPayment(grpc::ServerContext* context,
                          const ::payment::v1::GetPaymentRequest* request,
                          ::payment::v1::Payment* response) override;
  grpc::Status ListPayments(grpc::ServerContext* context,
                            const ::payment::v1::ListPaymentsRequest* request,
                            ::payment::v1::ListPaymentsResponse* response) override;

 private:
  PaymentCreator& creator_;
  PaymentReads& store_;
  const int64_t max_amount_minor_;
  const ShardGuard shard_;
};

void ToProto(const PaymentRecord& record, ::payment::v1::Payment* out);

}  // namespace outbox::payment
