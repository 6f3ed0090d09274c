#include "shared/roles/internal/producer_links.h"

#include <unistd.h>

#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/amqp/internal/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/reply_format.h"
#include "shared/roles/internal/role_options.h"

namespace outbox::internal {
namespace {

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "host";
  return name;
}

}  // namespace

absl::Status ValidateProducerLinks(Producer::Options& options, absl::string_view role) {
  RETURN_IF_ERROR(options.signing.Required(role));
  if (options.queue.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(role, ": options.queue is required"));
  }
  if (options.reply_queue.empty()) options.reply_queue = DefaultReplyQueue(options.queue);
  if (options.reply_queue == options.queue) {
    return absl::InvalidArgumentError(
        absl::StrCat(role, ": options.reply_queue must differ from its queue"));
  }
  if (options.reply_prefetch < 1) {
    return absl::InvalidArgumentError(absl::StrCat(role, ": options.reply_prefetch must be >= 1"));
  }
  if (absl::Status s = options.retry.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(role, ": options.retry: ", s.message()));
  }
  if (!options.decode_reply) options.decode_reply = DecodeDefaultReply;
  return absl::OkStatus();
}

RelayOptions RelayOptionsOf(const Producer::Options& options) {
  RelayOptions relay;
  relay.window = options.window;
  relay.hand_over_after = HandOverAfter(options.retry);
  relay.after_publish_failpoint = options.after_publish_failpoint;
  return relay;
}

AckListenerOptions AckListenerOptionsOf(const Producer::Options& options) {
  AckListenerOptions acks;
  acks.queue = options.reply_queue;
  acks.prefetch = options.reply_prefetch;
  acks.keys = options.signing.keys();
  acks.biz_key_label = options.biz_key_label;
  acks.record_failpoint = options.record_acks_failpoint;
  return acks;
}

ProducerLinks DialProducerLinks(const Producer::Options& options) {
  const Clock& clock = ClockOr(options.clock);
  ProducerLinks links;
  links.publisher = std::make_unique<AmqpPublisher>(options.amqp, Topology{{options.queue}},
                                                    options.name + "-relay", clock);
  links.replies = std::make_unique<AmqpConsumer>(options.amqp, Topology{{options.reply_queue}},
                                                 options.name + "-acks", options.reply_queue,
                                                 options.reply_prefetch, clock);
  return links;
}

std::string DefaultInstanceId(const std::string& queue) {
  return absl::StrCat(queue, "-", HostName(), "-", getpid());
}

}  // namespace outbox::internal
