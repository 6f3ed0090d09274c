#include "shared/amqp/internal/amqp_client.h"

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "shared/amqp/internal/amqp_tls.h"
#include "shared/observability/internal/trace.h"
#include "shared/observability/log.h"
#include "shared/outbox/message_auth.h"

namespace outbox {
namespace {

constexpr amqp_channel_t kChannel = 1;
// Passive declares, and the declares of dead-letter queues, go on a channel
// of their own: the broker closes the channel of one that finds no queue (or
// a queue declared with other arguments), and that must cost neither the
// main channel (its confirms, its consumer) nor the connection.
constexpr amqp_channel_t kInspectChannel = 2;

timeval AsTimeval(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  return absl::ToTimeval(d);
}

amqp_bytes_t Bytes(const std::string& s) {
  amqp_bytes_t b;
  b.len = s.size();
  b.bytes = const_cast<char*>(s.data());
  return b;
}

std::string ToString(amqp_bytes_t b) {
  return b.bytes == nullptr ? std::string() : std::string(static_cast<const char*>(b.bytes), b.len);
}

std::string DescribeReply(const amqp_rpc_reply_t& r) {
  switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL: return "ok";
    case AMQP_RESPONSE_NONE: return "missing rpc reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: return amqp_error_string2(r.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        auto* m = static_cast<amqp_connection_close_t*>(r.reply.decoded);
        return absl::StrCat("connection closed by broker: ", m->reply_code, " ",
                            ToString(m->reply_text));
      }
      if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
        return absl::StrCat("channel closed by broker: ", m->reply_code, " ",
                            ToString(m->reply_text));
      }
      return absl::StrCat("unexpected server method ", r.reply.id);
  }
  return "unknown reply";
}

// The reply code of the broker's channel.close or connection.close in `r`,
// or 0 when `r` is no such close (a library or socket error).
int CloseReplyCode(const amqp_rpc_reply_t& r) {
  if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION) return 0;
  if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
    return static_cast<amqp_channel_close_t*>(r.reply.decoded)->reply_code;
  }
  if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
    return static_cast<amqp_connection_close_t*>(r.reply.decoded)->reply_code;
  }
  return 0;
}

// "amqp: <what>: <why>" with the status code the broker's reply code maps to.
absl::Status ReplyStatus(absl::string_view what, const amqp_rpc_reply_t& r) {
  return absl::Status(StatusCodeOfAmqpReply(CloseReplyCode(r)),
                      absl::StrCat("amqp: ", what, ": ", DescribeReply(r)));
}

void FillDelivery(const amqp_basic_properties_t& p, amqp_bytes_t body, Delivery* d) {
  if (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG) d->message_id = ToString(p.message_id);
  if (p._flags & AMQP_BASIC_REPLY_TO_FLAG) d->reply_to = ToString(p.reply_to);
  if (p._flags & AMQP_BASIC_TYPE_FLAG) d->type = ToString(p.type);
  if (p._flags & AMQP_BASIC_HEADERS_FLAG) {
    for (int i = 0; i < p.headers.num_entries; ++i) {
      const amqp_table_entry_t& e = p.headers.entries[i];
      if (e.value.kind != AMQP_FIELD_KIND_UTF8 && e.value.kind != AMQP_FIELD_KIND_BYTES) continue;
      const std::string key = ToString(e.key);
      if (key == kTraceparentHeader) d->traceparent = ToString(e.value.value.bytes);
      if (key == kSignatureHeader) d->signature = ToString(e.value.value.bytes);
      if (key == kShardKeyHeader) d->shard_key = ToString(e.value.value.bytes);
    }
  }
  d->body = ToString(body);
}

}  // namespace

absl::StatusCode StatusCodeOfAmqpReply(int reply_code) {
  switch (reply_code) {
    case AMQP_NOT_FOUND:  // no such queue or exchange
    case AMQP_NO_ROUTE: return absl::StatusCode::kNotFound;
    case AMQP_ACCESS_REFUSED:  // the user's permissions do not allow it
    case AMQP_NOT_ALLOWED:     // e.g. no access to the vhost
      return absl::StatusCode::kPermissionDenied;
    case AMQP_PRECONDITION_FAILED:  // e.g. redeclared with other arguments
    case AMQP_RESOURCE_LOCKED:      // an exclusive queue of another connection
      return absl::StatusCode::kFailedPrecondition;
    case AMQP_CONTENT_TOO_LARGE: return absl::StatusCode::kInvalidArgument;
    case AMQP_RESOURCE_ERROR:  // the broker is short of a resource (memory, disk)
      return absl::StatusCode::kResourceExhausted;
    case AMQP_NOT_IMPLEMENTED: return absl::StatusCode::kUnimplemented;
    case AMQP_FRAME_ERROR:
    case AMQP_SYNTAX_ERROR:
    case AMQP_COMMAND_INVALID:
    case AMQP_CHANNEL_ERROR:
    case AMQP_UNEXPECTED_FRAME:
    case AMQP_INTERNAL_ERROR: return absl::StatusCode::kInternal;
    default:  // 0 (socket or library error), 320 connection forced, 313 no consumers
      return absl::StatusCode::kUnavailable;
  }
}

struct AmqpConnection::State {
  amqp_connection_state_t conn = nullptr;
  std::map<uint64_t, std::string> unconfirmed;  // delivery tag -> message id
  std::set<std::string> returned;               // message ids returned as unroutable

  // basic.ack or basic.nack: the tags it settles, appended to `settled`.
  void Settle(const amqp_method_t& method, std::vector<Confirm>* settled);
  // basic.return: reads the returned message and notes its id. An error
  // means the connection is broken.
  absl::Status NoteReturned(amqp_channel_t channel);
};

AmqpConnection::AmqpConnection(std::unique_ptr<State> state) : state_(std::move(state)) {}

AmqpConnection::~AmqpConnection() {
  if (state_->conn == nullptr) return;
  if (healthy_) {
    amqp_channel_close(state_->conn, kChannel, AMQP_REPLY_SUCCESS);
    amqp_connection_close(state_->conn, AMQP_REPLY_SUCCESS);
  }
  amqp_destroy_connection(state_->conn);
}

absl::StatusOr<std::unique_ptr<AmqpConnection>> AmqpConnection::Connect(
    const AmqpUrl& url, const std::string& connection_name, absl::Duration timeout) {
  auto state = std::make_unique<State>();
  state->conn = amqp_new_connection();
  // Owns the connection from here on, so every early return cleans up.
  std::unique_ptr<AmqpConnection> c(new AmqpConnection(std::move(state)));
  c->healthy_ = false;
  amqp_connection_state_t conn = c->state_->conn;
  amqp_socket_t* socket = url.tls ? amqp_ssl_socket_new(conn) : amqp_tcp_socket_new(conn);
  if (socket == nullptr) return absl::InternalError("amqp: cannot create socket");
  if (url.tls) {
    absl::Status s = amqp_internal::ConfigureTlsSocket(socket, url.host, url.tls_files);
    if (!s.ok()) return s;
  }
  timeval tv = AsTimeval(timeout);
  timeval open_tv =
      AsTimeval(std::min(timeout, url.tls ? 2 * kAmqpConnectTimeout : kAmqpConnectTimeout));
  amqp_internal::ClearTlsFailure();
  int rc = amqp_socket_open_noblock(socket, url.host.c_str(), url.port, &open_tv);
  if (rc != AMQP_STATUS_OK) {
    const std::string tls_failure = url.tls ? amqp_internal::DescribeTlsFailure(rc) : "";
    if (!tls_failure.empty()) {
      return absl::UnavailableError(absl::StrCat("amqp: TLS handshake with ", url.host, ":",
                                                 url.port, " failed: ", tls_failure));
    }
    return absl::UnavailableError(absl::StrCat("amqp: cannot connect to ", url.host, ":", url.port,
                                               ": ", amqp_error_string2(rc)));
  }
  // Sent data unacknowledged this long closes the socket (a one-way cut).
  const int fd = amqp_socket_get_sockfd(socket);
  const unsigned int user_timeout_ms =
      static_cast<unsigned int>(absl::ToInt64Milliseconds(kAmqpUserTimeout));
  if (fd >= 0 && setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
                            sizeof(user_timeout_ms)) != 0) {
    return absl::InternalError(
        absl::StrCat("amqp: setsockopt(TCP_USER_TIMEOUT): ", std::strerror(errno)));
  }
  amqp_set_handshake_timeout(conn, &tv);
  amqp_set_rpc_timeout(conn, &tv);
  amqp_table_entry_t props[1];
  props[0].key = amqp_cstring_bytes("connection_name");
  props[0].value.kind = AMQP_FIELD_KIND_UTF8;
  props[0].value.value.bytes = Bytes(connection_name);
  amqp_table_t client_properties = {1, props};
  const int heartbeat_seconds =
      static_cast<int>(std::clamp<int64_t>(absl::ToInt64Seconds(url.heartbeat), 0, 65535));
  amqp_rpc_reply_t r = amqp_login_with_properties(
      conn, url.vhost.c_str(), 0, 131072, heartbeat_seconds, &client_properties,
      AMQP_SASL_METHOD_PLAIN, url.user.c_str(), url.password.c_str());
  if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    return absl::UnavailableError(
        absl::StrCat("amqp: login to ", url.Redacted(), " failed: ", DescribeReply(r)));
  }
  amqp_channel_open(conn, kChannel);
  r = amqp_get_rpc_reply(conn);
  if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    return absl::UnavailableError(absl::StrCat("amqp: channel.open: ", DescribeReply(r)));
  }
  c->healthy_ = true;
  return c;
}

absl::Status AmqpConnection::Broken(absl::Status s) {
  healthy_ = false;
  return s;
}

absl::Status AmqpConnection::Check(const char* what) {
  amqp_rpc_reply_t r = amqp_get_rpc_reply(state_->conn);
  if (r.reply_type == AMQP_RESPONSE_NORMAL) return absl::OkStatus();
  return Broken(ReplyStatus(what, r));
}

std::string DeadLetterExchangeOf(const std::string& exchange) {
  return absl::StrCat(exchange, ".dead-letters");
}

absl::Status AmqpConnection::DeclareExchange(const std::string& exchange) {
  static const std::string kDirect = "direct";
  amqp_exchange_declare(state_->conn, kChannel, Bytes(exchange), Bytes(kDirect), /*passive=*/0,
                        /*durable=*/1, /*auto_delete=*/0, /*internal=*/0, amqp_empty_table);
  return Check("exchange.declare");
}

absl::Status AmqpConnection::Bind(const std::string& queue, const std::string& exchange) {
  return Bind(queue, exchange, queue);
}

absl::Status AmqpConnection::Bind(const std::string& queue, const std::string& exchange,
                                  const std::string& routing_key) {
  amqp_queue_bind(state_->conn, kChannel, Bytes(queue), Bytes(exchange), Bytes(routing_key),
                  amqp_empty_table);
  return Check("queue.bind");
}

absl::Status AmqpConnection::DeclareShards(const Topology& topology) {
  // x-consistent-hash (plugin rabbitmq_consistent_hash_exchange) hashing on
  // the header, not the routing key: the routing key stays the queue group's
  // name, so publishers and recovery send exactly as with one queue.
  static const std::string kConsistentHash = "x-consistent-hash";
  static const std::string kHeader = kShardKeyHeader;
  amqp_table_entry_t arg;
  arg.key = amqp_cstring_bytes("hash-header");
  arg.value.kind = AMQP_FIELD_KIND_UTF8;
  arg.value.value.bytes = Bytes(kHeader);
  amqp_exchange_declare(state_->conn, kChannel, Bytes(topology.hash_exchange),
                        Bytes(kConsistentHash), /*passive=*/0, /*durable=*/1, /*auto_delete=*/0,
                        /*internal=*/0, {1, &arg});
  absl::Status s = Check("exchange.declare x-consistent-hash");
  // Equal weights: each shard owns about 1/M of the hash ring.
  static const std::string kWeight = "1";
  for (size_t i = 0; s.ok() && i < topology.queues.size(); ++i) {
    s = Bind(topology.queues[i], topology.hash_exchange, kWeight);
  }
  if (!s.ok()) return s;
  // Last, so the group's routing key reaches the ring only once every shard
  // is on it.
  amqp_exchange_bind(state_->conn, kChannel, Bytes(topology.hash_exchange),
                     Bytes(topology.exchange), Bytes(topology.hash_routing_key), amqp_empty_table);
  return Check("exchange.bind");
}

absl::Status AmqpConnection::DeclareQueue(const std::string& queue, const std::string& queue_type,
                                          const std::string& exchange) {
  auto text = [](const char* key, amqp_bytes_t value) {
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(key);
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = value;
    return e;
  };
  const std::string dlq = Topology::DeadLetterQueue(queue);
  const std::string dlx = exchange.empty() ? "" : DeadLetterExchangeOf(exchange);
  std::vector<amqp_table_entry_t> dlq_args;
  if (!queue_type.empty()) dlq_args.push_back(text("x-queue-type", Bytes(queue_type)));
  if (queue_type == "quorum") {
    amqp_table_entry_t limit;
    limit.key = amqp_cstring_bytes("x-delivery-limit");
    limit.value.kind = AMQP_FIELD_KIND_I64;
    limit.value.value.i64 = kDeadLetterDeliveryLimit;
    dlq_args.push_back(limit);
  }
  auto declare_dlq = [&] {
    const amqp_table_t arguments{static_cast<int>(dlq_args.size()), dlq_args.data()};
    return DeclareAside(dlq, Declare::kDurable, arguments, "queue.declare dead-letter queue");
  };
  auto declared = declare_dlq();
  if (queue_type == "quorum" && absl::IsFailedPrecondition(declared.status())) {
    // Declared before without the limit (by an earlier release): a declare
    // with other arguments is refused, and the queue keeps the broker's
    // limit. Taken as it is, and said, so that an operator lifts the limit
    // with a policy (docs/deployment.md, Quorum queues).
    dlq_args.pop_back();
    declared = declare_dlq();
    if (declared.ok()) {
      LogWarning(
          "dead_letter_queue_delivery_limited",
          {KV("queue", dlq), KV("reason",
                                "declared without x-delivery-limit: the broker's delivery limit "
                                "applies (RabbitMQ 4.0: 20 looks per message); lift it with a "
                                "policy")});
    }
  }
  if (!declared.ok()) return declared.status();
  absl::Status s;
  if (!dlx.empty()) {
    s = DeclareExchange(dlx);
    if (s.ok()) s = Bind(dlq, dlx);
    if (!s.ok()) return s;
  }

  std::vector<amqp_table_entry_t> args = {text("x-dead-letter-exchange", Bytes(dlx)),
                                          text("x-dead-letter-routing-key", Bytes(dlq))};
  if (!queue_type.empty()) args.push_back(text("x-queue-type", Bytes(queue_type)));
  if (queue_type == "quorum") {
    // A quorum queue dead-letters at most once by default: a rejected message
    // would be lost if the DLQ's leader were away at that moment (a node
    // restart). At-least-once keeps it in this queue until the DLQ has it,
    // and needs overflow reject-publish (no length limit is set, so it
    // never rejects a publish).
    args.push_back(text("x-dead-letter-strategy", amqp_cstring_bytes("at-least-once")));
    args.push_back(text("x-overflow", amqp_cstring_bytes("reject-publish")));
  }
  amqp_queue_declare(state_->conn, kChannel, Bytes(queue), 0, 1, 0, 0,
                     {static_cast<int>(args.size()), args.data()});
  s = Check("queue.declare");
  if (!s.ok() || exchange.empty()) return s;
  s = DeclareExchange(exchange);
  if (!s.ok()) return s;
  return Bind(queue, exchange);
}

absl::Status AmqpConnection::DeclareTopology(const Topology& topology) {
  for (const std::string& queue : topology.queues) {
    absl::Status s = DeclareQueue(queue, topology.queue_type, topology.exchange);
    if (!s.ok()) return s;
  }
  if (!topology.hash_exchange.empty()) {
    absl::Status s = DeclareShards(topology);
    if (!s.ok()) return s;
  }
  PublishThrough(topology.exchange);
  return absl::OkStatus();
}

absl::Status AmqpConnection::EnableConfirms() {
  amqp_confirm_select(state_->conn, kChannel);
  absl::Status s = Check("confirm.select");
  if (s.ok()) {
    confirms_ = true;
    next_publish_tag_ = 1;
  }
  return s;
}

absl::StatusOr<uint64_t> AmqpConnection::Publish(const OutgoingMessage& m) {
  if (!healthy_) return absl::UnavailableError("amqp: connection is broken");
  if (!confirms_) return absl::FailedPreconditionError("amqp: confirms not enabled");
  static const std::string kContentType = "application/x-protobuf";
  amqp_basic_properties_t props;
  props._flags =
      AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG;
  props.delivery_mode = persistent_ ? 2 : 1;  // 2 = persistent, 1 = transient
  props.message_id = Bytes(m.message_id);
  props.content_type = Bytes(kContentType);
  if (!m.reply_to.empty()) {
    props._flags |= AMQP_BASIC_REPLY_TO_FLAG;
    props.reply_to = Bytes(m.reply_to);
  }
  if (!m.type.empty()) {
    props._flags |= AMQP_BASIC_TYPE_FLAG;
    props.type = Bytes(m.type);
  }
  amqp_table_entry_t headers[3];
  int num_headers = 0;
  auto add_header = [&](const char* key, const std::string& value) {
    if (value.empty()) return;
    amqp_table_entry_t& h = headers[num_headers++];
    h.key = amqp_cstring_bytes(key);
    h.value.kind = AMQP_FIELD_KIND_UTF8;
    h.value.value.bytes = Bytes(value);
  };
  add_header(kTraceparentHeader, m.traceparent);
  add_header(kSignatureHeader, m.signature);
  add_header(kShardKeyHeader, m.shard_key);
  if (num_headers > 0) {
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers = {num_headers, headers};
  }
  // The message's topic is the AMQP routing key: the exchange routes on it.
  int rc = amqp_basic_publish(state_->conn, kChannel, Bytes(exchange_), Bytes(m.topic),
                              /*mandatory=*/1, /*immediate=*/0, &props, Bytes(m.body));
  if (rc != AMQP_STATUS_OK) {
    return Broken(
        absl::UnavailableError(absl::StrCat("amqp: basic.publish: ", amqp_error_string2(rc))));
  }
  const uint64_t tag = next_publish_tag_++;
  state_->unconfirmed[tag] = m.message_id;
  return tag;
}

size_t AmqpConnection::unconfirmed() const {
  return state_->unconfirmed.size();
}

void AmqpConnection::State::Settle(const amqp_method_t& method, std::vector<Confirm>* settled) {
  const bool ack = method.id == AMQP_BASIC_ACK_METHOD;
  uint64_t tag;
  bool multiple;
  if (ack) {
    auto* a = static_cast<amqp_basic_ack_t*>(method.decoded);
    tag = a->delivery_tag;
    multiple = a->multiple;
  } else {
    auto* n = static_cast<amqp_basic_nack_t*>(method.decoded);
    tag = n->delivery_tag;
    multiple = n->multiple;
  }
  // `multiple` settles every unconfirmed tag up to and including `tag`.
  auto first = multiple ? unconfirmed.begin() : unconfirmed.find(tag);
  auto last = multiple ? unconfirmed.upper_bound(tag)
                       : (first == unconfirmed.end() ? first : std::next(first));
  for (auto it = first; it != last; ++it) {
    const bool was_returned = returned.erase(it->second) > 0;
    settled->push_back({it->first, ack && !was_returned, was_returned});
  }
  unconfirmed.erase(first, last);
}

absl::Status AmqpConnection::State::NoteReturned(amqp_channel_t channel) {
  // Unroutable (no such queue): the ack that follows must not count.
  amqp_message_t msg;
  amqp_rpc_reply_t r = amqp_read_message(conn, channel, &msg, 0);
  if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    return absl::UnavailableError(
        absl::StrCat("amqp: reading returned message: ", DescribeReply(r)));
  }
  if (msg.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG) {
    returned.insert(ToString(msg.properties.message_id));
  }
  amqp_destroy_message(&msg);
  return absl::OkStatus();
}

absl::Status AmqpConnection::ReadConfirms(absl::Duration wait, std::vector<Confirm>* settled) {
  if (!healthy_) return absl::UnavailableError("amqp: connection is broken");
  amqp_maybe_release_buffers(state_->conn);
  const absl::Time deadline = absl::Now() + wait;
  const size_t before = settled->size();
  while (!state_->unconfirmed.empty()) {
    // Block only until the first confirm; then take what is already here.
    timeval tv =
        AsTimeval(settled->size() > before ? absl::ZeroDuration() : deadline - absl::Now());
    amqp_frame_t frame;
    int rc = amqp_simple_wait_frame_noblock(state_->conn, &frame, &tv);
    if (rc == AMQP_STATUS_TIMEOUT) break;
    if (rc != AMQP_STATUS_OK) {
      return Broken(absl::UnavailableError(
          absl::StrCat("amqp: waiting for confirms: ", amqp_error_string2(rc))));
    }
    if (frame.frame_type != AMQP_FRAME_METHOD) continue;
    switch (frame.payload.method.id) {
      case AMQP_BASIC_ACK_METHOD:
      case AMQP_BASIC_NACK_METHOD: state_->Settle(frame.payload.method, settled); break;
      case AMQP_BASIC_RETURN_METHOD: {
        absl::Status noted = state_->NoteReturned(frame.channel);
        if (!noted.ok()) return Broken(std::move(noted));
        break;
      }
      case AMQP_CHANNEL_CLOSE_METHOD: {
        // E.g. "403 ACCESS_REFUSED - access to exchange ..." or "404 NOT_FOUND - no exchange".
        auto* m = static_cast<amqp_channel_close_t*>(frame.payload.method.decoded);
        return Broken(
            absl::Status(StatusCodeOfAmqpReply(m->reply_code),
                         absl::StrCat("amqp: channel closed by broker while waiting for confirms: ",
                                      m->reply_code, " ", ToString(m->reply_text))));
      }
      case AMQP_CONNECTION_CLOSE_METHOD:
        return Broken(absl::UnavailableError("amqp: closed by broker while waiting for confirms"));
      default: break;
    }
  }
  return absl::OkStatus();
}

namespace {
// Lends a plain connection to PublishAndConfirm for the duration of one call.
class BorrowedPublisher final : public MessagePublisher {
 public:
  explicit BorrowedPublisher(AmqpConnection& conn) : conn_(conn) {}
  absl::Status Connect() override { return absl::OkStatus(); }
  bool connected() const override { return conn_.healthy(); }
  bool up() const override { return conn_.healthy(); }
  int64_t drops() const override { return 0; }
  void Reset(const absl::Status&) override {}
  absl::Status Poll(absl::Duration wait) override { return conn_.Poll(wait); }
  absl::StatusOr<uint64_t> Publish(const OutgoingMessage& m) override { return conn_.Publish(m); }
  absl::Status ReadConfirms(absl::Duration wait, std::vector<Confirm>* settled) override {
    return conn_.ReadConfirms(wait, settled);
  }
  absl::StatusOr<QueueState> Inspect(const std::string& queue) override {
    return conn_.Inspect(queue);
  }

 private:
  AmqpConnection& conn_;
};
}  // namespace

absl::StatusOr<std::vector<bool>> AmqpConnection::PublishConfirmed(
    const std::vector<OutgoingMessage>& messages, absl::Duration timeout,
    std::vector<bool>* unroutable) {
  BorrowedPublisher publisher(*this);
  auto confirms = PublishAndConfirm(publisher, messages, timeout, SystemClock::Get());
  if (!confirms.ok()) return confirms.status();
  std::vector<bool> confirmed(messages.size());
  if (unroutable != nullptr) unroutable->assign(messages.size(), false);
  for (size_t i = 0; i < confirms->size(); ++i) {
    confirmed[i] = (*confirms)[i].ok;
    if (unroutable != nullptr) (*unroutable)[i] = (*confirms)[i].unroutable;
  }
  return confirmed;
}

absl::Status AmqpConnection::Consume(const std::string& queue, int prefetch) {
  amqp_basic_qos(state_->conn, kChannel, 0, static_cast<uint16_t>(prefetch), 0);
  absl::Status s = Check("basic.qos");
  if (!s.ok()) return s;
  amqp_basic_consume(state_->conn, kChannel, Bytes(queue), amqp_empty_bytes, 0, /*no_ack=*/0, 0,
                     amqp_empty_table);
  return Check("basic.consume");
}

absl::StatusOr<std::vector<Delivery>> AmqpConnection::NextDeliveries(size_t max,
                                                                     absl::Duration wait) {
  if (!healthy_) return absl::UnavailableError("amqp: connection is broken");
  amqp_maybe_release_buffers(state_->conn);
  std::vector<Delivery> out;
  while (out.size() < max) {
    timeval tv = AsTimeval(out.empty() ? wait : absl::ZeroDuration());
    amqp_envelope_t env;
    amqp_rpc_reply_t r = amqp_consume_message(state_->conn, &env, &tv, 0);
    if (r.reply_type == AMQP_RESPONSE_NORMAL) {
      Delivery d;
      d.delivery_tag = env.delivery_tag;
      d.redelivered = env.redelivered;
      FillDelivery(env.message.properties, env.message.body, &d);
      amqp_destroy_envelope(&env);
      out.push_back(std::move(d));
      continue;
    }
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT)
      break;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
      amqp_frame_t frame;
      int rc = amqp_simple_wait_frame(state_->conn, &frame);
      if (rc != AMQP_STATUS_OK) {
        return Broken(
            absl::UnavailableError(absl::StrCat("amqp: reading frame: ", amqp_error_string2(rc))));
      }
      if (frame.frame_type == AMQP_FRAME_METHOD &&
          (frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
           frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD ||
           frame.payload.method.id == AMQP_BASIC_CANCEL_METHOD)) {
        return Broken(absl::UnavailableError("amqp: consumer closed by broker"));
      }
      continue;
    }
    return Broken(absl::UnavailableError(absl::StrCat("amqp: consume: ", DescribeReply(r))));
  }
  return out;
}

absl::Status AmqpConnection::Ack(uint64_t delivery_tag, bool multiple) {
  int rc = amqp_basic_ack(state_->conn, kChannel, delivery_tag, multiple ? 1 : 0);
  if (rc != AMQP_STATUS_OK)
    return Broken(
        absl::UnavailableError(absl::StrCat("amqp: basic.ack: ", amqp_error_string2(rc))));
  return absl::OkStatus();
}

absl::Status AmqpConnection::Reject(uint64_t delivery_tag) {
  int rc = amqp_basic_reject(state_->conn, kChannel, delivery_tag, /*requeue=*/0);
  if (rc != AMQP_STATUS_OK)
    return Broken(
        absl::UnavailableError(absl::StrCat("amqp: basic.reject: ", amqp_error_string2(rc))));
  return absl::OkStatus();
}

absl::Status AmqpConnection::Requeue(uint64_t delivery_tag, bool multiple) {
  int rc = amqp_basic_nack(state_->conn, kChannel, delivery_tag, multiple ? 1 : 0, /*requeue=*/1);
  if (rc != AMQP_STATUS_OK)
    return Broken(
        absl::UnavailableError(absl::StrCat("amqp: basic.nack: ", amqp_error_string2(rc))));
  return absl::OkStatus();
}

absl::Status AmqpConnection::Poll(absl::Duration wait) {
  if (!healthy_) return absl::UnavailableError("amqp: connection is broken");
  amqp_maybe_release_buffers(state_->conn);
  timeval tv = AsTimeval(wait);
  amqp_frame_t frame;
  int rc = amqp_simple_wait_frame_noblock(state_->conn, &frame, &tv);
  if (rc == AMQP_STATUS_TIMEOUT) return absl::OkStatus();
  if (rc != AMQP_STATUS_OK) {
    return Broken(absl::UnavailableError(absl::StrCat("amqp: ", amqp_error_string2(rc))));
  }
  if (frame.frame_type == AMQP_FRAME_METHOD &&
      (frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
       frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)) {
    return Broken(absl::UnavailableError("amqp: closed by broker"));
  }
  return absl::OkStatus();
}

absl::StatusOr<QueueState> AmqpConnection::Inspect(const std::string& queue) {
  return DeclareAside(queue, Declare::kPassive, amqp_empty_table, "queue.declare passive");
}

absl::StatusOr<bool> AmqpConnection::Lock(const std::string& queue) {
  // Classic whatever the virtual host's default queue type: a quorum queue
  // cannot be exclusive.
  amqp_table_entry_t type;
  type.key = amqp_cstring_bytes("x-queue-type");
  type.value.kind = AMQP_FIELD_KIND_UTF8;
  type.value.value.bytes = amqp_cstring_bytes("classic");
  int refused = 0;
  auto declared = DeclareAside(LockQueueOf(queue), Declare::kExclusive, {1, &type},
                               "queue.declare lock", &refused);
  if (declared.ok()) {
    locks_.insert(queue);
    return true;
  }
  if (refused == AMQP_RESOURCE_LOCKED) return false;
  return declared.status();
}

absl::Status AmqpConnection::Unlock(const std::string& queue) {
  if (locks_.count(queue) == 0) return absl::OkStatus();
  if (absl::Status s = OpenInspectChannel(); !s.ok()) return s;
  amqp_queue_delete(state_->conn, kInspectChannel, Bytes(LockQueueOf(queue)), /*if_unused=*/0,
                    /*if_empty=*/0);
  const amqp_rpc_reply_t r = amqp_get_rpc_reply(state_->conn);
  if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
    return InspectChannelClosed(ReplyStatus("queue.delete lock", r));
  }
  absl::Status s = Check("queue.delete lock");
  if (s.ok()) locks_.erase(queue);
  return s;
}

absl::Status AmqpConnection::OpenInspectChannel() {
  if (!healthy_) return absl::UnavailableError("amqp: connection is broken");
  if (inspect_channel_open_) return absl::OkStatus();
  amqp_channel_open(state_->conn, kInspectChannel);
  absl::Status s = Check("channel.open (inspect)");
  if (s.ok()) inspect_channel_open_ = true;
  return s;
}

absl::Status AmqpConnection::InspectChannelClosed(absl::Status why) {
  inspect_channel_open_ = false;
  amqp_channel_close_ok_t close_ok{};
  int rc = amqp_send_method(state_->conn, kInspectChannel, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok);
  if (rc != AMQP_STATUS_OK) {
    return Broken(
        absl::UnavailableError(absl::StrCat("amqp: channel.close-ok: ", amqp_error_string2(rc))));
  }
  return why;
}

absl::StatusOr<QueueState> AmqpConnection::DeclareAside(const std::string& queue, Declare how,
                                                        const amqp_table_t& arguments,
                                                        const char* what, int* refused) {
  if (absl::Status s = OpenInspectChannel(); !s.ok()) return s;
  const bool passive = how == Declare::kPassive;
  amqp_queue_declare_ok_t* ok = amqp_queue_declare(
      state_->conn, kInspectChannel, Bytes(queue), passive ? 1 : 0,
      /*durable=*/how == Declare::kDurable ? 1 : 0,
      /*exclusive=*/how == Declare::kExclusive ? 1 : 0, /*auto_delete=*/0, arguments);
  const amqp_rpc_reply_t r = amqp_get_rpc_reply(state_->conn);
  if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
    // Only that channel is closed: acknowledge it; the next call opens it again.
    const int code = CloseReplyCode(r);
    if (refused != nullptr) *refused = code;
    return InspectChannelClosed(
        passive && code == AMQP_NOT_FOUND
            ? absl::NotFoundError(absl::StrCat("amqp: no queue '", queue, "'"))
            : ReplyStatus(what, r));
  }
  absl::Status s = Check(what);
  if (!s.ok()) return s;
  return QueueState{static_cast<int64_t>(ok->message_count), static_cast<int>(ok->consumer_count)};
}

absl::StatusOr<uint32_t> AmqpConnection::MessageCount(const std::string& queue) {
  auto state = Inspect(queue);
  if (!state.ok()) return state.status();
  return static_cast<uint32_t>(state->ready);
}

absl::Status AmqpConnection::DeleteQueue(const std::string& queue) {
  amqp_queue_delete(state_->conn, kChannel, Bytes(queue), 0, 0);
  return Check("queue.delete");
}

absl::StatusOr<uint32_t> AmqpConnection::Purge(const std::string& queue) {
  amqp_queue_purge_ok_t* ok = amqp_queue_purge(state_->conn, kChannel, Bytes(queue));
  absl::Status s = Check("queue.purge");
  if (!s.ok()) return s;
  return ok->message_count;
}

absl::StatusOr<Delivery> AmqpConnection::Get(const std::string& queue) {
  amqp_maybe_release_buffers(state_->conn);
  amqp_rpc_reply_t r = amqp_basic_get(state_->conn, kChannel, Bytes(queue), /*no_ack=*/0);
  if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    return Broken(absl::UnavailableError(absl::StrCat("amqp: basic.get: ", DescribeReply(r))));
  }
  Delivery d;
  if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD) return d;
  auto* ok = static_cast<amqp_basic_get_ok_t*>(r.reply.decoded);
  d.delivery_tag = ok->delivery_tag;
  d.redelivered = ok->redelivered;
  amqp_message_t msg;
  r = amqp_read_message(state_->conn, kChannel, &msg, 0);
  if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    return Broken(absl::UnavailableError(absl::StrCat("amqp: basic.get body: ", DescribeReply(r))));
  }
  FillDelivery(msg.properties, msg.body, &d);
  amqp_destroy_message(&msg);
  return d;
}

}  // namespace outbox
