#pragma once

// The API's promises, checked after the creates: a replay returns the same
// payment, a reused key with another request is refused, bad input is
// INVALID_ARGUMENT. Each miss is printed to stderr.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "client/create_load.h"
#include "payment/v1/payment.grpc.pb.h"

namespace outbox::demo {

struct Checks {
  int replays = 0, replays_ok = 0;
  bool reuse_rejected = true;
  int invalid_rejected = 0;
  size_t invalid = 0;
  bool ok() const {
    return replays_ok == replays && reuse_rejected && invalid_rejected == static_cast<int>(invalid);
  }
};

// Requests that must be rejected with INVALID_ARGUMENT, each with what is wrong.
std::vector<std::pair<std::string, payment::v1::CreatePaymentRequest>> InvalidRequests(
    const std::string& run_id);

Checks RunChecks(payment::v1::PaymentService::StubInterface& stub,
                 const std::vector<client::Created>& created, const std::string& run_id);

}  // namespace outbox::demo
