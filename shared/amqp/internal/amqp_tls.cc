#include "shared/amqp/internal/amqp_tls.h"

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace outbox::amqp_internal {
namespace {

// The first certificate error of the handshake running on this thread: a
// connection is opened by the thread that owns it, and rabbitmq-c keeps the
// reason to itself.
thread_local int t_verify_error = X509_V_OK;

int RecordVerifyError(int ok, X509_STORE_CTX* store) {
  if (ok == 0 && t_verify_error == X509_V_OK) t_verify_error = X509_STORE_CTX_get_error(store);
  return ok;
}

// OpenSSL would prompt on the terminal for the password of an encrypted key;
// a service has no one to ask, so such a key simply does not load.
int NoPassword(char*, int, int, void*) {
  return 0;
}

// ": <OpenSSL's reason>" for the last error on this thread's queue, or "".
std::string OpensslReason() {
  const unsigned long e = ERR_peek_last_error();
  const char* reason = e == 0 ? nullptr : ERR_reason_error_string(e);
  return reason == nullptr ? "" : absl::StrCat(": ", reason);
}

}  // namespace

absl::Status CheckTlsFiles(bool tls, const AmqpTlsFiles& files) {
  if (!tls) {
    if (files.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "--amqp_tls_ca_file, --amqp_tls_cert_file and --amqp_tls_key_file (AMQP_TLS_*) are for "
        "an amqps:// --amqp_url; this one is amqp:// (plaintext)");
  }
  if (files.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "amqps:// needs --amqp_tls_ca_file (AMQP_TLS_CA_FILE), the CA bundle the broker's "
        "certificate must chain to");
  }
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--amqp_tls_cert_file and --amqp_tls_key_file go together (AMQP_TLS_CERT_FILE, "
        "AMQP_TLS_KEY_FILE): the client certificate and its key");
  }
  const std::pair<const char*, const std::string*> named[] = {
      {"amqp_tls_ca_file", &files.ca_file},
      {"amqp_tls_cert_file", &files.cert_file},
      {"amqp_tls_key_file", &files.key_file}};
  for (const auto& [flag, path] : named) {
    if (path->empty()) continue;
    std::ifstream in(*path);
    if (!in.good()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read '", *path, "'"));
    }
  }
  // Load them the way every connection will, so a bad file stops the start.
  amqp_connection_state_t conn = amqp_new_connection();
  if (conn == nullptr) return absl::ResourceExhaustedError("amqp: cannot allocate a connection");
  amqp_socket_t* socket = amqp_ssl_socket_new(conn);
  absl::Status s = socket == nullptr ? absl::InternalError("amqp: cannot create a TLS socket")
                                     : ConfigureTlsSocket(socket, "localhost", files);
  amqp_destroy_connection(conn);  // also deletes the socket
  return s;
}

absl::Status ConfigureTlsSocket(amqp_socket_t* socket, const std::string& host,
                                const AmqpTlsFiles& files) {
  if (files.ca_file.empty()) {
    return absl::InvalidArgumentError("amqps:// needs --amqp_tls_ca_file (AMQP_TLS_CA_FILE)");
  }
  auto* ctx = static_cast<SSL_CTX*>(amqp_ssl_socket_get_context(socket));
  SSL_CTX_set_default_passwd_cb(ctx, NoPassword);
  ERR_clear_error();
  if (amqp_ssl_socket_set_cacert(socket, files.ca_file.c_str()) != AMQP_STATUS_OK) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--amqp_tls_ca_file: no CA certificate loads from '", files.ca_file, "'", OpensslReason()));
  }
  if (!files.cert_file.empty()) {
    ERR_clear_error();
    if (amqp_ssl_socket_set_key(socket, files.cert_file.c_str(), files.key_file.c_str()) !=
        AMQP_STATUS_OK) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--amqp_tls_cert_file, --amqp_tls_key_file: '", files.cert_file, "' and '",
          files.key_file, "' are not a PEM certificate and its unencrypted key", OpensslReason()));
    }
  }
  if (amqp_ssl_socket_set_ssl_versions(socket, AMQP_TLSv1_2, AMQP_TLSvLATEST) != AMQP_STATUS_OK) {
    return absl::InternalError("amqp: this OpenSSL cannot do TLS 1.2");
  }
  amqp_ssl_socket_set_verify_peer(socket, 1);
  // Replaced by OpenSSL's check below, which also knows IP addresses (see the header).
  amqp_ssl_socket_set_verify_hostname(socket, 0);
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  // An IP literal must be in the certificate as an IP address, a name as a name.
  if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1 &&
      X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("amqp: cannot verify a broker as '", host, "'"));
  }
  // Verify during the handshake, so a broker that fails is refused there
  // (and learns why from the alert) instead of after it.
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, RecordVerifyError);
  return absl::OkStatus();
}

void ClearTlsFailure() {
  t_verify_error = X509_V_OK;
  ERR_clear_error();
}

std::string DescribeTlsFailure(int amqp_status) {
  if (t_verify_error != X509_V_OK) {
    return absl::StrCat("certificate verify failed: ",
                        X509_verify_cert_error_string(t_verify_error));
  }
  switch (amqp_status) {
    case AMQP_STATUS_SSL_ERROR:
    case AMQP_STATUS_SSL_CONNECTION_FAILED:
    case AMQP_STATUS_SSL_PEER_VERIFY_FAILED:
    case AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED:
      return absl::StrCat(amqp_error_string2(amqp_status), OpensslReason());
    default: return "";
  }
}

}  // namespace outbox::amqp_internal
