#include "tests/support/raw_amqp.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "shared/amqp/amqp_url.h"

namespace outbox::testing {
namespace {

constexpr amqp_channel_t kChannel = 1;

std::string ToString(amqp_bytes_t b) {
  return b.bytes == nullptr ? std::string() : std::string(static_cast<const char*>(b.bytes), b.len);
}

struct Closer {
  void operator()(amqp_connection_state_t_* c) const {
    amqp_channel_close(c, kChannel, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
  }
};
using Connection = std::unique_ptr<amqp_connection_state_t_, Closer>;

absl::Status Failed(const char* what, const amqp_rpc_reply_t& r) {
  if (r.reply_type == AMQP_RESPONSE_NORMAL) return absl::OkStatus();
  if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
    auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", m->reply_code, " ", ToString(m->reply_text)));
  }
  return absl::UnavailableError(absl::StrCat(what, " failed (reply type ", r.reply_type, ")"));
}

absl::StatusOr<Connection> Open(const std::string& amqp_url) {
  auto url = AmqpUrl::Parse(amqp_url);
  if (!url.ok()) return url.status();
  Connection c(amqp_new_connection());
  amqp_socket_t* socket = amqp_tcp_socket_new(c.get());
  if (amqp_socket_open(socket, url->host.c_str(), url->port) != AMQP_STATUS_OK) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", url->HostPort()));
  }
  absl::Status s =
      Failed("login", amqp_login(c.get(), url->vhost.c_str(), 0, 131072, 0, AMQP_SASL_METHOD_PLAIN,
                                 url->user.c_str(), url->password.c_str()));
  if (!s.ok()) return s;
  amqp_channel_open(c.get(), kChannel);
  s = Failed("channel.open", amqp_get_rpc_reply(c.get()));
  if (!s.ok()) return s;
  return c;
}

int64_t IntegerOf(const amqp_field_value_t& v) {
  switch (v.kind) {
    case AMQP_FIELD_KIND_I8: return v.value.i8;
    case AMQP_FIELD_KIND_U8: return v.value.u8;
    case AMQP_FIELD_KIND_I16: return v.value.i16;
    case AMQP_FIELD_KIND_U16: return v.value.u16;
    case AMQP_FIELD_KIND_I32: return v.value.i32;
    case AMQP_FIELD_KIND_U32: return v.value.u32;
    case AMQP_FIELD_KIND_I64: return v.value.i64;
    case AMQP_FIELD_KIND_U64: return static_cast<int64_t>(v.value.u64);
    default: return -1;
  }
}

}  // namespace

absl::Status DeclarePlainQuorumQueue(const std::string& amqp_url, const std::string& queue) {
  auto c = Open(amqp_url);
  if (!c.ok()) return c.status();
  amqp_table_entry_t type;
  type.key = amqp_cstring_bytes("x-queue-type");
  type.value.kind = AMQP_FIELD_KIND_UTF8;
  type.value.value.bytes = amqp_cstring_bytes("quorum");
  amqp_queue_declare(c->get(), kChannel, amqp_cstring_bytes(queue.c_str()), /*passive=*/0,
                     /*durable=*/1, /*exclusive=*/0, /*auto_delete=*/0, {1, &type});
  return Failed("queue.declare", amqp_get_rpc_reply(c->get()));
}

absl::StatusOr<std::map<std::string, int64_t>> DeliveryCounts(const std::string& amqp_url,
                                                              const std::string& queue) {
  auto c = Open(amqp_url);
  if (!c.ok()) return c.status();
  std::map<std::string, int64_t> counts;
  for (;;) {
    amqp_maybe_release_buffers(c->get());
    amqp_rpc_reply_t r =
        amqp_basic_get(c->get(), kChannel, amqp_cstring_bytes(queue.c_str()), /*no_ack=*/0);
    if (absl::Status s = Failed("basic.get", r); !s.ok()) return s;
    if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD) break;
    amqp_message_t m;
    if (absl::Status s = Failed("basic.get body", amqp_read_message(c->get(), kChannel, &m, 0));
        !s.ok()) {
      return s;
    }
    int64_t count = 0;
    if (m.properties._flags & AMQP_BASIC_HEADERS_FLAG) {
      for (int i = 0; i < m.properties.headers.num_entries; ++i) {
        const amqp_table_entry_t& h = m.properties.headers.entries[i];
        if (ToString(h.key) == "x-delivery-count") count = IntegerOf(h.value);
      }
    }
    const std::string id = (m.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
                               ? ToString(m.properties.message_id)
                               : std::string();
    auto [at, inserted] = counts.emplace(id, count);
    if (!inserted) at->second = std::min(at->second, count);
    amqp_destroy_message(&m);
  }
  return counts;  // the connection closes: every message taken goes back
}

}  // namespace outbox::testing
