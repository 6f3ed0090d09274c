#include "shared/roles/consumer.h"

#include <algorithm>
#include <utility>

#include "shared/amqp/internal/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/reply_format.h"
#include "shared/roles/config.h"
#include "shared/roles/internal/role_options.h"

namespace outbox {
namespace {

absl::Status Validate(Consumer::Options& options) {
  RETURN_IF_ERROR(options.signing.Required("Consumer"));
  if (options.queue.empty())
    return absl::InvalidArgumentError("Consumer: options.queue is required");
  if (options.reply_queue.empty()) options.reply_queue = DefaultReplyQueue(options.queue);
  if (options.reply_queue == options.queue) {
    return absl::InvalidArgumentError("Consumer: options.reply_queue must differ from its queue");
  }
  if (options.reply_topology.has_value() &&
      std::find(options.reply_topology->queues.begin(), options.reply_topology->queues.end(),
                options.reply_queue) == options.reply_topology->queues.end()) {
    return absl::InvalidArgumentError(
        "Consumer: options.reply_topology must declare its reply_queue");
  }
  if (options.prefetch < 1)
    return absl::InvalidArgumentError("Consumer: options.prefetch must be >= 1");
  if (options.inbox_retention < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "Consumer: options.inbox_retention must be >= 0 (0 keeps every id)");
  }
  return absl::OkStatus();
}

ConsumerOptions ConsumerOptionsOf(const Consumer::Options& options) {
  ConsumerOptions consumer;
  consumer.queue = options.queue;
  consumer.default_reply_to = options.reply_queue;
  consumer.prefetch = options.prefetch;
  consumer.linger = options.linger;
  consumer.linger_batch = options.linger_batch;
  consumer.confirm_timeout = options.confirm_timeout;
  consumer.keys = options.signing.keys();
  if (!options.booked_metric.empty()) consumer.booked_metric = options.booked_metric;
  if (!options.booked_help.empty()) consumer.booked_help = options.booked_help;
  consumer.after_apply_failpoint = options.after_apply_failpoint;
  consumer.before_ack_failpoint = options.before_ack_failpoint;
  return consumer;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Start(ConsumerHandler& handler,
                                                          const Config& config) {
  return Start(handler, ConsumerOptionsOf(config));
}

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Start(ConsumerHandler& handler,
                                                          Options options) {
  RETURN_IF_ERROR(Validate(options));
  const Clock& clock = internal::ClockOr(options.clock);
  auto deliveries = std::make_unique<AmqpConsumer>(
      options.amqp, options.topology.value_or(Topology{{options.queue}}), options.name,
      options.queue, options.prefetch, clock);
  auto replies = std::make_unique<AmqpPublisher>(
      options.amqp, options.reply_topology.value_or(Topology{{options.reply_queue}}),
      options.name + "-replies", clock);
  ASSIGN_OR_RETURN(std::unique_ptr<Consumer> consumer,
                   Create(handler, std::move(options), std::move(deliveries), std::move(replies)));
  consumer->StartWorkers();
  return consumer;
}

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Create(
    ConsumerHandler& handler, Options options, std::unique_ptr<MessageConsumer> deliveries,
    std::unique_ptr<MessagePublisher> replies) {
  RETURN_IF_ERROR(Validate(options));
  return std::unique_ptr<Consumer>(
      new Consumer(handler, std::move(options), std::move(deliveries), std::move(replies)));
}

Consumer::Consumer(ConsumerHandler& handler, Options options,
                   std::unique_ptr<MessageConsumer> deliveries,
                   std::unique_ptr<MessagePublisher> replies)
    : options_(std::move(options)),
      deliveries_(std::move(deliveries)),
      replies_(std::move(replies)),
      signing_replies_(*replies_, options_.signing.keys()),
      consumer_(*deliveries_, signing_replies_, handler, internal::ClockOr(options_.clock),
                internal::MetricsOr(options_.metrics, own_metrics_), ConsumerOptionsOf(options_)) {
  ProcessedLog* inbox = handler.processed_log();
  if (inbox == nullptr || options_.inbox_retention == absl::ZeroDuration()) return;
  PrunerOptions pruning;
  pruning.retention = options_.inbox_retention;
  pruner_ = std::make_unique<ProcessedPruner>(*inbox, internal::ClockOr(options_.clock),
                                              internal::MetricsOr(options_.metrics, own_metrics_),
                                              pruning);
}

Consumer::~Consumer() {
  Stop();
}

void Consumer::StartWorkers() {
  consumer_.Start();
  if (pruner_ != nullptr) pruner_->Start();
}

void Consumer::Stop() {
  consumer_.Stop();
  if (pruner_ != nullptr) pruner_->Stop();
}

absl::StatusOr<int64_t> Consumer::PruneStep() {
  if (pruner_ == nullptr) return 0;
  return pruner_->Pass();
}

}  // namespace outbox
