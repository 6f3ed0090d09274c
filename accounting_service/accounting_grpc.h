#pragma once

// gRPC edge of the accounting service (read side of the ledger).
#include "accounting/v1/accounting.grpc.pb.h"
#include "accounting_service/voucher_store.h"
#include "service_kit/grpc/server_security.h"

namespace outbox::accounting {

class AccountingServiceImpl final : public ::accounting::v1::AccountingService::Service {
 public:
  // `auth`: the API token every call must carry (none by default).
  explicit AccountingServiceImpl(VoucherStore& store, BearerTokenCheck auth = {})
      : store_(store), auth_(std::move(auth)) {}

  grpc::Status GetVoucher(grpc::ServerContext* context,
                          const ::accounting::v1::GetVoucherRequest* request,
                          ::accounting::v1::Voucher* response) override;
  grpc::Status ListVouchers(grpc::ServerContext* context,
                            const ::accounting::v1::ListVouchersRequest* request,
                            ::accounting::v1::ListVouchersResponse* response) override;

 private:
  VoucherStore& store_;
  const BearerTokenCheck auth_;
};

}  // namespace outbox::accounting
