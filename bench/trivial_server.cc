#include "bench/trivial_server.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "payment/v1/payment.grpc.pb.h"

namespace outbox::bench {
namespace {

// payment.v1.PaymentService answering CreatePayment from the request, with
// nothing behind it.
class TrivialPayments final : public ::payment::v1::PaymentService::Service {
  grpc::Status CreatePayment(grpc::ServerContext*, const ::payment::v1::CreatePaymentRequest* req,
                             ::payment::v1::CreatePaymentResponse* resp) override {
    ::payment::v1::Payment* p = resp->mutable_payment();
    p->set_payment_id(req->idempotency_key());
    p->set_idempotency_key(req->idempotency_key());
    p->set_payer_account(req->payer_account());
    p->set_payee_account(req->payee_account());
    p->set_amount_minor(req->amount_minor());
    p->set_currency(req->currency());
    p->set_description(req->description());
    p->mutable_outbox()->set_message_id(req->idempotency_key());
    p->mutable_outbox()->set_status(::payment::v1::SENDING);
    return grpc::Status::OK;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<TrivialServerProcess>> TrivialServerProcess::Start() {
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    close(to_child[0]);
    close(to_child[1]);
    return absl::InternalError("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
  char arg0[] = "outbox_bench", arg1[] = "--serve_trivial_payments";
  char* argv[] = {arg0, arg1, nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);
  close(from_child[1]);
  auto process = std::unique_ptr<TrivialServerProcess>(
      new TrivialServerProcess(rc == 0 ? pid : 0, to_child[1]));
  std::string line;
  char c = 0;
  while (read(from_child[0], &c, 1) == 1 && c != '\n') line.push_back(c);
  close(from_child[0]);
  if (rc != 0 || !absl::SimpleAtoi(line, &process->port_) || process->port_ <= 0) {
    return absl::InternalError("the trivial gRPC server did not start");
  }
  return process;
}

TrivialServerProcess::~TrivialServerProcess() {
  close(stdin_);
  if (pid_ > 0) waitpid(pid_, nullptr, 0);
}

int ServeTrivialPayments() {
  TrivialPayments service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return 1;
  std::printf("%d\n", port);
  std::fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  server->Shutdown();
  return 0;
}

}  // namespace outbox::bench
