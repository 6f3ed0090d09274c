#pragma once

// Where an AMQP connection goes: the amqp:// or amqps:// URL (one broker or a
// cluster's nodes), parsed and checked before anything dials, and the TLS
// files an amqps URL connects with.
#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace outbox {

// The PEM files of an amqps:// connection. The broker's certificate must
// chain to ca_file and name the host of the URL; cert_file + key_file are
// presented to brokers that verify clients.
struct AmqpTlsFiles {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool empty() const { return ca_file.empty() && cert_file.empty() && key_file.empty(); }
};

// One broker node.
struct AmqpAddress {
  std::string host;
  int port = 0;
  bool operator==(const AmqpAddress& o) const { return host == o.host && port == o.port; }
};

// The AMQP heartbeat a connection asks for unless told otherwise
// (AmqpUrl::heartbeat; docs/design.md, "Noticing a dead link").
inline constexpr absl::Duration kAmqpHeartbeat = absl::Seconds(3);

struct AmqpUrl {
  // The node Connect dials (the first of `addresses` after Parse).
  std::string host = "127.0.0.1";
  int port = 5672;
  // Every node of a cluster, in the order given; one entry for a single
  // broker. AmqpDialer fails over through them; empty means host:port.
  std::vector<AmqpAddress> addresses;
  std::string user = "guest";
  std::string password = "guest";
  std::string vhost = "/";
  bool tls = false;        // amqps://
  AmqpTlsFiles tls_files;  // used with tls only
  // The heartbeat asked of the broker (it may grant less): a link silent
  // for two of them is dead, in both directions. Whole seconds
  // (CheckHeartbeat); not part of the URL's text.
  absl::Duration heartbeat = kAmqpHeartbeat;

  // amqp://user:pass@host:port/vhost (AMQP URI spec; "%2F" is "/"), or
  // amqps://... (port 5671 by default). A cluster lists its nodes in the
  // authority, all with the same credentials and vhost:
  // amqp://user:pass@host1:port1,host2:port2,host3:port3/vhost.
  // Syntax only: an amqps URL connects once tls_files holds a CA.
  static absl::StatusOr<AmqpUrl> Parse(absl::string_view url);
  // Parse, then `tls_files` checked against the scheme and loaded once:
  // amqps needs a CA, cert and key come together, amqp takes no files.
  // INVALID_ARGUMENT naming the flag (--amqp_tls_ca_file, ...).
  static absl::StatusOr<AmqpUrl> Parse(absl::string_view url, AmqpTlsFiles tls_files);
  // Replaces `password` with the contents of the file at `path` (surrounding
  // whitespace dropped), so that neither the URL nor a command line holds
  // it: the services' AMQP_PASSWORD_FILE. INVALID_ARGUMENT naming
  // --amqp_password_file when the file is unreadable or empty; a file every
  // user may read is used, with a password_file_too_open warning logged.
  absl::Status ReadPasswordFile(const std::string& path);
  std::string Redacted() const;  // for logs: the password is never printed
  // INVALID_ARGUMENT unless `heartbeat` is a whole number of seconds from 2 s
  // to 65535 s (AMQP's limit). Idle workers poll their connections every
  // second at most (the relay), and the broker closes one silent for two
  // heartbeats, so 1 s would drop healthy ones; 0 (none) would leave a dead
  // link unnoticed. `flag` names the setting in the message.
  static absl::Status CheckHeartbeat(absl::Duration heartbeat, absl::string_view flag);

  // The nodes to try (never empty), and this URL narrowed to node i of them.
  std::vector<AmqpAddress> Nodes() const;
  AmqpUrl Node(size_t i) const;
  std::string HostPort() const;  // "host:port" of the node Connect dials
};

}  // namespace outbox
