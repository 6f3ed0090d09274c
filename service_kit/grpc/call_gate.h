#pragma once

// The one bearer-token check of every served API: each method of a
// protected service passes it before its handler runs, so a handler has no
// check of its own and a new method is protected without one. Health and
// reflection are registered beside the gate, so they stay open.
//
// gRPC C++ (1.51) has no hook that can refuse a call before its handler: a
// server interceptor cannot hijack a call, and an AuthMetadataProcessor
// needs TLS credentials (plaintext is the default here). So the gate serves
// each protected service through a copy of its method table whose handlers
// check first and run the service's own handler only for a call that
// passes; a refused call is answered by that handler's own path with the
// refusal (its request never reaches the service). The server's interceptor
// (grpc_server.cc) asks the same check when the status goes out, so a
// callback method's refusal carries the right code too, and logs
// `call_refused`.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "service_kit/grpc/server_security.h"

namespace outbox {

// A service to serve and the check every one of its methods passes first.
// Without a check (the default, or a check with no token) the service is
// served as it is.
struct ServedService {
  ServedService(grpc::Service* s) : service(s) {}  // NOLINT(runtime/explicit): open services
  ServedService(grpc::Service* s, BearerTokenCheck a) : service(s), auth(std::move(a)) {}
  grpc::Service* service;
  BearerTokenCheck auth;
};

class CallGate {
 public:
  CallGate() = default;
  CallGate(const CallGate&) = delete;
  CallGate& operator=(const CallGate&) = delete;
  ~CallGate();

  // Adds `served`, behind its check when it has one. INTERNAL for a method
  // the gate cannot put a check in front of (async, raw or streaming ones;
  // the APIs here are unary, sync or callback).
  absl::Status Add(const ServedService& served);

  // What to register with the server, in the order added.
  const std::vector<grpc::Service*>& services() const { return services_; }

  // OK, or the status a call of `method` ("/package.Service/Method") with
  // this context's metadata is refused with. Methods of open services and
  // unknown ones (health, reflection) pass.
  grpc::Status Check(absl::string_view method, const grpc::ServerContextBase& context) const;

 private:
  std::vector<std::unique_ptr<BearerTokenCheck>> checks_;
  std::vector<std::unique_ptr<grpc::Service>> gated_;
  std::vector<grpc::Service*> services_;
  std::map<std::string, const BearerTokenCheck*, std::less<>> by_method_;
};

}  // namespace outbox
