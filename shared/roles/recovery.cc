#include "shared/roles/recovery.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/amqp/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/reply_format.h"
#include "shared/roles/role_options.h"

namespace outbox {
namespace {

absl::Status Validate(Recovery::Options& options) {
  RETURN_IF_ERROR(options.signing.Required("Recovery"));
  RecoveryOptions& loop = options.recovery;
  if (!options.queue.empty()) {
    if (options.reply_queue.empty()) options.reply_queue = DefaultReplyQueue(options.queue);
    if (loop.watched_queues.empty()) loop.watched_queues = {options.queue};
    if (loop.reply_queues.empty()) loop.reply_queues = {options.reply_queue};
    if (loop.dead_letter_sources.empty()) {
      loop.dead_letter_sources = {options.queue, options.reply_queue};
    }
  }
  if (absl::Status s = loop.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Recovery: options.recovery: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Recovery>> Recovery::Start(Options options) {
  RETURN_IF_ERROR(Validate(options));
  if (options.db.empty()) return absl::InvalidArgumentError("Recovery: options.db is required");
  if (options.producer_db.schema == nullptr) {
    return absl::InvalidArgumentError("Recovery: options.producer_db.schema is required");
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<RecoveryStore> store,
      RecoveryStore::OpenWhenCreated(options.db, options.db_options, options.producer_db,
                                     options.wait_for_db, options.on_wait));
  store->set_instance(options.recovery.instance_id);
  auto publisher = std::make_unique<AmqpPublisher>(
      options.amqp, Topology{}, absl::StrCat(options.name, "-", options.recovery.instance_id),
      internal::ClockOr(options.clock));
  auto alerts = std::make_unique<Alerter>(options.alerts);
  RecoveryStore& store_ref = *store;
  Alerter& alerter = *alerts;
  ASSIGN_OR_RETURN(
      std::unique_ptr<Recovery> recovery,
      Create(std::move(options), std::move(store), std::move(publisher), std::move(alerts)));
  MetricsRegistry& metrics =
      internal::MetricsOr(recovery->options_.metrics, recovery->own_metrics_);
  store_ref.RegisterMetrics(metrics, internal::ClockOr(recovery->options_.clock));
  alerter.RegisterMetrics(metrics);
  recovery->alerter_ = &alerter;
  recovery->StartWorkers();
  return recovery;
}

absl::StatusOr<std::unique_ptr<Recovery>> Recovery::Create(
    Options options, std::unique_ptr<RecoveryRepository> store,
    std::unique_ptr<MessagePublisher> publisher, std::unique_ptr<AlertSink> alerts) {
  RETURN_IF_ERROR(Validate(options));
  return std::unique_ptr<Recovery>(
      new Recovery(std::move(options), std::move(store), std::move(publisher), std::move(alerts)));
}

Recovery::Recovery(Options options, std::unique_ptr<RecoveryRepository> store,
                   std::unique_ptr<MessagePublisher> publisher, std::unique_ptr<AlertSink> alerts)
    : options_(std::move(options)),
      store_(std::move(store)),
      publisher_(std::move(publisher)),
      alerts_(std::move(alerts)),
      signing_publisher_(*publisher_, options_.signing.keys()),
      loop_(*store_, signing_publisher_, *alerts_, internal::ClockOr(options_.clock),
            internal::MetricsOr(options_.metrics, own_metrics_), options_.recovery) {}

Recovery::~Recovery() {
  Stop();
}

void Recovery::StartWorkers() {
  loop_.Start();
}

void Recovery::Stop() {
  if (stopped_) return;
  stopped_ = true;
  loop_.Stop();
  if (alerter_ != nullptr) alerter_->Stop();
}

}  // namespace outbox
