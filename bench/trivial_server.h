#pragma once

// The gRPC layer with nothing behind it: a payment.v1.PaymentService that
// answers CreatePayment from the request, in a child process of its own
// (this program again, as `outbox_bench --serve_trivial_payments`), so that
// its CPU can be read apart from the client's.
#include <memory>

#include "absl/status/statusor.h"

namespace outbox::bench {

// The child, started with its stdin and stdout on pipes: it serves on a
// loopback port until its stdin is closed, which the destructor does.
class TrivialServerProcess {
 public:
  static absl::StatusOr<std::unique_ptr<TrivialServerProcess>> Start();
  ~TrivialServerProcess();
  TrivialServerProcess(const TrivialServerProcess&) = delete;
  TrivialServerProcess& operator=(const TrivialServerProcess&) = delete;

  int pid() const { return pid_; }
  int port() const { return port_; }

 private:
  TrivialServerProcess(int pid, int stdin_fd) : pid_(pid), stdin_(stdin_fd) {}
  const int pid_;
  const int stdin_;
  int port_ = 0;
};

// The child's side (outbox_bench --serve_trivial_payments): gRPC's sync
// server, as the services use; prints the port on stdout and stops when its
// stdin closes. Returns the process's exit code.
int ServeTrivialPayments();

}  // namespace outbox::bench
