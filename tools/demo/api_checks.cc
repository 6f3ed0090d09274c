#include "tools/demo/api_checks.h"

#include <cstdio>
#include <functional>

#include "absl/strings/str_cat.h"
#include "client/request.h"
#include "client/retry.h"
#include "tools/demo/demo_config.h"

namespace outbox::demo {
namespace {

using payment::v1::CreatePaymentRequest;
using payment::v1::CreatePaymentResponse;
using payment::v1::PaymentService;

grpc::Status Create(PaymentService::StubInterface& stub, const CreatePaymentRequest& req,
                    CreatePaymentResponse* resp) {
  return client::CreateWithRetries(stub, req, FewTries(), resp);
}

// Same key and request -> same payment, replayed=true.
void CheckReplays(PaymentService::StubInterface& stub, const std::vector<client::Created>& created,
                  Checks& out) {
  for (size_t i = 0; i < created.size() && out.replays < kMaxReplays; ++i) {
    if (created[i].payment_id.empty()) continue;
    ++out.replays;
    CreatePaymentResponse resp;
    grpc::Status s = Create(stub, created[i].request, &resp);
    if (s.ok() && resp.replayed() && resp.payment().payment_id() == created[i].payment_id) {
      ++out.replays_ok;
    } else {
      std::fprintf(stderr, "outbox_demo: replay of %zu: status %d replayed=%d id=%s\n", i,
                   static_cast<int>(s.error_code()), resp.replayed(),
                   resp.payment().payment_id().c_str());
    }
  }
}

// Same key, different request -> rejected.
void CheckKeyReuse(PaymentService::StubInterface& stub, const std::vector<client::Created>& created,
                   Checks& out) {
  if (created.empty() || created[0].payment_id.empty()) return;
  CreatePaymentRequest changed = created[0].request;
  changed.set_amount_minor(changed.amount_minor() + 1);
  CreatePaymentResponse resp;
  grpc::Status s = Create(stub, changed, &resp);
  out.reuse_rejected = s.error_code() == grpc::StatusCode::ALREADY_EXISTS ||
                       s.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
  if (!out.reuse_rejected) {
    std::fprintf(stderr, "outbox_demo: key reuse with another amount got status %d\n",
                 static_cast<int>(s.error_code()));
  }
}

// Invalid requests -> INVALID_ARGUMENT.
void CheckInvalid(PaymentService::StubInterface& stub, const std::string& run_id, Checks& out) {
  const auto invalid = InvalidRequests(run_id);
  out.invalid = invalid.size();
  for (const auto& [what, req] : invalid) {
    CreatePaymentResponse resp;
    grpc::Status s = Create(stub, req, &resp);
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      ++out.invalid_rejected;
    } else {
      std::fprintf(stderr, "outbox_demo: invalid request (%s) got status %d\n", what.c_str(),
                   static_cast<int>(s.error_code()));
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, CreatePaymentRequest>> InvalidRequests(
    const std::string& run_id) {
  std::vector<std::pair<std::string, CreatePaymentRequest>> out;
  auto add = [&](const std::string& what, const std::function<void(CreatePaymentRequest&)>& f) {
    CreatePaymentRequest r =
        client::PaymentRequest(client::KeyPrefix("demo", run_id), 0, kDescription);
    r.set_idempotency_key(absl::StrCat("demo-invalid-", run_id, "-", out.size()));
    f(r);
    out.emplace_back(what, std::move(r));
  };
  add("empty idempotency_key", [](auto& r) { r.clear_idempotency_key(); });
  add("idempotency_key too long", [](auto& r) { r.set_idempotency_key(std::string(129, 'k')); });
  add("zero amount", [](auto& r) { r.set_amount_minor(0); });
  add("negative amount", [](auto& r) { r.set_amount_minor(-5); });
  add("lower-case currency", [](auto& r) { r.set_currency("eur"); });
  add("payer == payee", [](auto& r) { r.set_payee_account(r.payer_account()); });
  add("empty payer", [](auto& r) { r.clear_payer_account(); });
  return out;
}

Checks RunChecks(PaymentService::StubInterface& stub, const std::vector<client::Created>& created,
                 const std::string& run_id) {
  Checks out;
  CheckReplays(stub, created, out);
  CheckKeyReuse(stub, created, out);
  CheckInvalid(stub, run_id, out);
  return out;
}

}  // namespace outbox::demo
