#include "shared/amqp/amqp_url.h"

#include <amqp.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "shared/amqp/internal/amqp_tls.h"
#include "shared/base/internal/small_file.h"
#include "shared/observability/log.h"

namespace outbox {

namespace {

absl::StatusOr<AmqpUrl> ParseOneNode(absl::string_view url) {
  // rabbitmq-c reads a C string: whatever followed a NUL would be dropped
  // unseen. Control characters, also percent-encoded ones, would reach logs
  // through Redacted().
  auto has_control = [](absl::string_view s) {
    return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
  };
  if (has_control(url)) return absl::InvalidArgumentError("AMQP URL contains a control character");
  std::string buf(url);
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(buf.data(), &info) != AMQP_STATUS_OK) {
    return absl::InvalidArgumentError(
        "AMQP URL must look like amqp://user:pass@host:port/vhost (or amqps://...)");
  }
  // rabbitmq-c accepts port 0, which cannot be connected to.
  if (info.port < 1 || info.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("AMQP URL port must be 1..65535, not ", info.port));
  }
  if (has_control(info.host) || has_control(info.user) || has_control(info.vhost)) {
    return absl::InvalidArgumentError("AMQP URL contains an encoded control character");
  }
  AmqpUrl out;
  out.host = info.host;
  out.port = info.port;
  out.user = info.user;
  out.password = info.password;
  out.vhost = info.vhost;
  out.tls = info.ssl != 0;
  out.addresses = {{out.host, out.port}};
  return out;
}

}  // namespace

absl::StatusOr<AmqpUrl> AmqpUrl::Parse(absl::string_view url) {
  for (absl::string_view scheme : {",amqp://", ",amqps://"}) {
    if (absl::StrContains(url, scheme)) {
      return absl::InvalidArgumentError(
          "AMQP URL: list a cluster's nodes in one URL, "
          "amqp://user:pass@host1:port1,host2:port2/vhost, not as several URLs");
    }
  }
  // The node list is the authority after the last '@' (a password may hold
  // commas, never an unencoded '@' or '/').
  const size_t scheme_end = url.find("://");
  if (scheme_end == absl::string_view::npos) return ParseOneNode(url);
  const size_t begin = scheme_end + 3;
  const size_t end = std::min(url.find('/', begin), url.size());
  const size_t at = url.substr(begin, end - begin).rfind('@');
  const size_t hosts_begin = at == absl::string_view::npos ? begin : begin + at + 1;
  const absl::string_view hosts = url.substr(hosts_begin, end - hosts_begin);
  if (!absl::StrContains(hosts, ',')) return ParseOneNode(url);

  absl::StatusOr<AmqpUrl> out;
  std::vector<AmqpAddress> addresses;
  for (absl::string_view node : absl::StrSplit(hosts, ',')) {
    if (node.empty()) {
      return absl::InvalidArgumentError(
          "AMQP URL: empty node in the list (write host1:port1,host2:port2)");
    }
    absl::StatusOr<AmqpUrl> one =
        ParseOneNode(absl::StrCat(url.substr(0, hosts_begin), node, url.substr(end)));
    if (!one.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("AMQP URL: node ", addresses.size() + 1, ": ", one.status().message()));
    }
    const AmqpAddress address{one->host, one->port};
    if (std::find(addresses.begin(), addresses.end(), address) != addresses.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("AMQP URL: node ", address.host, ":", address.port, " is listed twice"));
    }
    addresses.push_back(address);
    if (!out.ok()) out = std::move(one);
  }
  out->addresses = std::move(addresses);
  return out;
}

absl::StatusOr<AmqpUrl> AmqpUrl::Parse(absl::string_view url, AmqpTlsFiles tls_files) {
  absl::StatusOr<AmqpUrl> out = Parse(url);
  if (!out.ok()) return out;
  absl::Status s = amqp_internal::CheckTlsFiles(out->tls, tls_files);
  if (!s.ok()) return s;
  out->tls_files = std::move(tls_files);
  return out;
}

absl::Status AmqpUrl::ReadPasswordFile(const std::string& path) {
  std::string warning;
  absl::StatusOr<std::string> read = ReadTokenFile(path, "amqp_password_file", &warning);
  if (!read.ok()) return read.status();
  if (!warning.empty()) LogWarning("password_file_too_open", {KV("warning", warning)});
  password = *std::move(read);
  return absl::OkStatus();
}

std::string AmqpUrl::Redacted() const {
  std::vector<std::string> nodes;
  for (const AmqpAddress& a : Nodes()) nodes.push_back(absl::StrCat(a.host, ":", a.port));
  return absl::StrCat(tls ? "amqps://" : "amqp://", user, ":***@", absl::StrJoin(nodes, ","), "/",
                      vhost == "/" ? "%2F" : vhost);
}

absl::Status AmqpUrl::CheckHeartbeat(absl::Duration heartbeat, absl::string_view flag) {
  if (heartbeat >= absl::Seconds(2) && heartbeat <= absl::Seconds(65535) &&
      heartbeat == absl::Seconds(absl::ToInt64Seconds(heartbeat))) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " must be a whole number of seconds from 2s to 65535s, not ",
                   absl::FormatDuration(heartbeat)));
}

std::vector<AmqpAddress> AmqpUrl::Nodes() const {
  if (addresses.empty()) return {{host, port}};
  return addresses;
}

AmqpUrl AmqpUrl::Node(size_t i) const {
  AmqpUrl one = *this;
  const std::vector<AmqpAddress> nodes = Nodes();
  one.addresses = {nodes[i % nodes.size()]};
  one.host = one.addresses[0].host;
  one.port = one.addresses[0].port;
  return one;
}

std::string AmqpUrl::HostPort() const {
  return absl::StrCat(host, ":", port);
}

}  // namespace outbox
