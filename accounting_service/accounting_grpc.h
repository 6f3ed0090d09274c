#pragma once

// gRPC edge of the accounting service (read side of the ledger).
#include "accounting/v1/accounting.grpc.pb.h"
#include "accounting_service/voucher_reads.h"

namespace outbox::accounting {

class AccountingServiceImpl final : public ::accounting::v1::AccountingService::Service {
 public:
  // The API token is checked before any handler runs (Serving, call_gate.h).
  explicit AccountingServiceImpl(VoucherReads& store) : store_(store) {}

  grpc::Status GetVoucher(grpc::ServerContext* context,
                          const ::accounting::v1::GetVoucherRequest* request,
                          ::accounting::v1::Voucher* response) override;
  grpc::Status ListVouchers(grpc::ServerContext* context,
                            const ::accounting::v1::ListVouchersRequest* request,
                            ::accounting::v1::ListVouchersResponse* response) override;

 private:
  VoucherReads& store_;
};

}  // namespace outbox::accounting
