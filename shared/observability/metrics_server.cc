#include "shared/observability/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CivetServer.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace outbox {
namespace {

// Runs before prometheus-cpp's handler, which civetweb would also give every
// path below /metrics (and which would answer other methods with 404): any
// other path gets 404 here, another method on /metrics 405. Returns 0 to let
// the request through, else the status it sent.
int RefuseAllButGetMetrics(mg_connection* conn) {
  const mg_request_info* request = mg_get_request_info(conn);
  const char* path = request->local_uri != nullptr ? request->local_uri : "";
  int status = 0;
  if (std::strcmp(path, "/metrics") != 0) {
    status = 404;
  } else if (std::strcmp(request->request_method, "GET") != 0) {
    status = 405;
  }
  if (status == 0) return 0;
  const std::string body = status == 404 ? "try /metrics\n" : "only GET /metrics\n";
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", "text/plain; charset=utf-8", -1);
  mg_response_header_add(conn, "Content-Length", std::to_string(body.size()).c_str(), -1);
  if (status == 405) mg_response_header_add(conn, "Allow", "GET", -1);
  mg_response_header_send(conn);
  mg_write(conn, body.data(), body.size());
  return status;
}

// Why `addr` cannot be bound, found by trying (civetweb's exception does not
// say); `fallback` when the trial binds after all.
std::string WhyNotBindable(const sockaddr_in& addr, const std::string& fallback) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int err = bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : errno;
  close(fd);
  if (err == EADDRINUSE) return "address already in use (another process holds it)";
  return err != 0 ? std::strerror(err) : fallback;
}

// Opens and closes a connection to `addr` (0.0.0.0 is reached on loopback).
void Knock(sockaddr_in addr) {
  if (addr.sin_addr.s_addr == htonl(INADDR_ANY)) addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  close(fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen, const MetricsRegistry& registry) {
  return Start(listen, std::vector<const MetricsRegistry*>{&registry});
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen, const std::vector<const MetricsRegistry*>& registries) {
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address must be host:port, got '", listen, "'"));
  }
  std::string host = listen.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics host must be an IPv4 address, got '", host, "'"));
  }
  CivetCallbacks callbacks;  // copied by the server
  callbacks.begin_request = RefuseAllButGetMetrics;
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // Two threads: a slow scrape (outbox_rows counts a table) does not hold
    // up the next one.
    exposer = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", absl::StrCat(host, ":", port), "num_threads",
                                 "2"},
        &callbacks);
  } catch (const std::exception& e) {
    // The port or address is the operator's to fix: FAILED_PRECONDITION (exit 2).
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot listen on ", listen, " for /metrics: ", WhyNotBindable(addr, e.what())));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::InternalError(absl::StrCat("metrics: no port listening for ", listen));
  }
  for (const MetricsRegistry* registry : registries) {
    for (const auto& collectable : registry->Collectables()) {
      exposer->RegisterCollectable(collectable);
    }
  }
  addr.sin_port = htons(static_cast<uint16_t>(ports.front()));
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(exposer), addr));
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, sockaddr_in address)
    : exposer_(std::move(exposer)), address_(address), port_(ntohs(address.sin_port)) {}

MetricsServer::~MetricsServer() {
  // civetweb's listening thread waits for connections in 2 s slices and looks
  // at its stop flag only between them. Knocking until it has stopped ends
  // the wait, so a service's shutdown does not take up to 2 s longer.
  std::atomic<bool> stopped{false};
  std::thread knocker([this, &stopped] {
    while (!stopped.load()) {
      Knock(address_);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer_.reset();
  stopped = true;
  knocker.join();
}

}  // namespace outbox
