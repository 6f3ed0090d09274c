#include "service_kit/grpc/call_gate.h"

#include <google/protobuf/message_lite.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/impl/service_type.h>

#include "absl/strings/str_cat.h"

namespace outbox {
namespace {

using MethodTable = std::vector<std::unique_ptr<grpc::internal::RpcServiceMethod>>;
using MethodTableMember = MethodTable grpc::Service::*;

// grpc::Service keeps its method table private and offers no way to read
// it; the gate needs each method's name, kind and handler. An explicit
// instantiation may name a private member, so this reads the table without
// changing it (the service's own handlers stay where they are).
MethodTableMember MethodTableOf();
template <MethodTableMember Member>
struct ExposeMethodTable {
  friend MethodTableMember MethodTableOf() { return Member; }
};
template struct ExposeMethodTable<&grpc::Service::methods_>;

// Runs the service's handler for a call that passes `check`; a refused call
// goes down the same handler's refusal path (as a request that did not
// parse would), so gRPC finishes it as usual and the service never sees it.
class GuardedHandler final : public grpc::internal::MethodHandler {
 public:
  GuardedHandler(grpc::internal::MethodHandler* inner, const BearerTokenCheck* check, bool callback)
      : inner_(inner), check_(check), callback_(callback) {}

  void RunHandler(const HandlerParameter& param) override {
    if (param.status.ok()) {
      grpc::Status refused = check_->Check(*param.server_context);
      if (!refused.ok()) {
        // A sync handler destroys the request only when it runs the method;
        // a callback one keeps it in the call's message holder.
        if (!callback_ && param.request != nullptr) {
          static_cast<google::protobuf::MessageLite*>(param.request)->~MessageLite();
        }
        inner_->RunHandler(HandlerParameter(param.call, param.server_context, nullptr, refused,
                                            param.internal_data, param.call_requester));
        return;
      }
    }
    inner_->RunHandler(param);
  }

  void* Deserialize(grpc_call* call, grpc_byte_buffer* request, grpc::Status* status,
                    void** handler_data) override {
    return inner_->Deserialize(call, request, status, handler_data);
  }

 private:
  grpc::internal::MethodHandler* const inner_;  // owned by the service
  const BearerTokenCheck* const check_;
  const bool callback_;
};

// `inner`'s methods, each behind a GuardedHandler; registered in its place.
class GatedService final : public grpc::Service {
 public:
  absl::Status Wrap(grpc::Service& inner, const BearerTokenCheck* check,
                    std::vector<std::string>* names) {
    using ApiType = grpc::internal::RpcServiceMethod::ApiType;
    int index = 0;
    for (const auto& method : inner.*MethodTableOf()) {
      if (method == nullptr) continue;  // generic: not this service's to serve
      const bool callback = method->api_type() == ApiType::CALL_BACK;
      if ((method->api_type() != ApiType::SYNC && !callback) || method->handler() == nullptr ||
          method->method_type() != grpc::internal::RpcMethod::NORMAL_RPC) {
        return absl::InternalError(
            absl::StrCat(method->name(), ": only unary sync or callback methods can be gated"));
      }
      auto* guarded = new GuardedHandler(method->handler(), check, callback);
      if (callback) {
        AddMethod(
            new grpc::internal::RpcServiceMethod(method->name(), method->method_type(), nullptr));
        MarkMethodCallback(index, guarded);
      } else {
        AddMethod(
            new grpc::internal::RpcServiceMethod(method->name(), method->method_type(), guarded));
      }
      names->push_back(method->name());
      ++index;
    }
    return absl::OkStatus();
  }
};

}  // namespace

CallGate::~CallGate() = default;

absl::Status CallGate::Add(const ServedService& served) {
  if (!served.auth.enabled()) {
    services_.push_back(served.service);
    return absl::OkStatus();
  }
  checks_.push_back(std::make_unique<BearerTokenCheck>(served.auth));
  auto gated = std::make_unique<GatedService>();
  std::vector<std::string> names;
  if (absl::Status s = gated->Wrap(*served.service, checks_.back().get(), &names); !s.ok()) {
    return s;
  }
  for (std::string& name : names) by_method_[std::move(name)] = checks_.back().get();
  services_.push_back(gated.get());
  gated_.push_back(std::move(gated));
  return absl::OkStatus();
}

grpc::Status CallGate::Check(absl::string_view method,
                             const grpc::ServerContextBase& context) const {
  auto it = by_method_.find(method);
  if (it == by_method_.end()) return grpc::Status::OK;
  return it->second->Check(context);
}

}  // namespace outbox
