#pragma once

// TLS for amqps:// connections, on rabbitmq-c's OpenSSL socket. Internal to
// shared/amqp (amqp_client.cc, amqp_url.cc); rabbitmq-c and OpenSSL stay in the .cc files.
//
// Verification is always on: the broker's certificate must chain to the CA
// file and name the host dialled (a DNS name or an IP address). rabbitmq-c
// 0.11's own host check only looks at DNS names, so an amqps://127.0.0.1 URL
// could never pass it; OpenSSL's check, which also matches IP addresses,
// runs instead and fails the handshake itself.
#include <string>

#include "absl/status/status.h"
#include "shared/amqp/amqp_url.h"

struct amqp_socket_t_;  // rabbitmq-c's amqp_socket_t

namespace outbox::amqp_internal {

// For amqps (`tls`): a CA file, cert and key both or neither, each file
// readable and loadable. For amqp: no files at all. INVALID_ARGUMENT naming
// the flag (--amqp_tls_ca_file, --amqp_tls_cert_file, --amqp_tls_key_file).
absl::Status CheckTlsFiles(bool tls, const AmqpTlsFiles& files);

// Loads the files into `socket` (from amqp_ssl_socket_new), requires TLS 1.2
// or later and verifies the broker as `host`.
absl::Status ConfigureTlsSocket(amqp_socket_t_* socket, const std::string& host,
                                const AmqpTlsFiles& files);

// Forgets this thread's last TLS failure; call before opening the socket.
void ClearTlsFailure();

// Why the handshake that just failed on this thread failed, e.g.
// "certificate verify failed: IP address mismatch"; "" if it was not TLS.
std::string DescribeTlsFailure(int amqp_status);

}  // namespace outbox::amqp_internal
