#include "shared/roles/recovery.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "shared/amqp/internal/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/reply_format.h"
#include "shared/roles/config.h"
#include "shared/roles/internal/role_options.h"

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
  for (const auto& [queue, exchange] : options.redrive_exchanges) {
    if (std::find(loop.dead_letter_sources.begin(), loop.dead_letter_sources.end(), queue) ==
        loop.dead_letter_sources.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Recovery: options.redrive_exchanges names '", queue,
                       "', which is not among options.recovery.dead_letter_sources"));
    }
  }
  if (options.sweep_dead_letters < 0) {
    return absl::InvalidArgumentError("Recovery: options.sweep_dead_letters must be >= 0");
  }
  if (absl::Status s = loop.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Recovery: options.recovery: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Recovery>> Recovery::Start(const Config& config) {
  return Start(RecoveryOptionsOf(config));
}

absl::StatusOr<std::unique_ptr<Recovery>> Recovery::Start(Options options) {
  RETURN_IF_ERROR(Validate(options));
  if (options.db.empty()) return absl::InvalidArgumentError("Recovery: options.db is required");
  // IsPgConninfo's test (shared/postgres/pg_connection.h), which this
  // library cannot call: the file would be waited for in vain, and named
  // with its password.
  if (absl::StartsWith(options.db, "postgresql://") ||
      absl::StartsWith(options.db, "postgres://")) {
    return absl::InvalidArgumentError(
        "Recovery: options.db is a PostgreSQL URI; StartPgRecovery (shared/postgres/pg_recovery.h) "
        "runs recovery on it");
  }
  if (options.producer_db.schema == nullptr) {
    return absl::InvalidArgumentError("Recovery: options.producer_db.schema is required");
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<RecoveryStore> store,
      RecoveryStore::OpenWhenCreated(options.db, options.db_options, options.producer_db,
                                     options.wait_for_db, options.on_wait));
  store->set_instance(options.recovery.instance_id);
  store->set_on_closed(options.on_closed);
  RecoveryStore& store_ref = *store;
  return StartOn(std::move(options), std::move(store), &store_ref, nullptr);
}

absl::StatusOr<std::unique_ptr<Recovery>> Recovery::Start(
    Options options, std::unique_ptr<RecoveryRepository> store,
    std::unique_ptr<OperatorRepository> operator_store) {
  RETURN_IF_ERROR(Validate(options));
  if (store == nullptr) return absl::InvalidArgumentError("Recovery: no store given");
  return StartOn(std::move(options), std::move(store), nullptr, std::move(operator_store));
}

absl::StatusOr<std::unique_ptr<Recovery>> Recovery::StartOn(
    Options options, std::unique_ptr<RecoveryRepository> store, RecoveryStore* sqlite_store,
    std::unique_ptr<OperatorRepository> operator_store) {
  auto publisher = std::make_unique<AmqpPublisher>(
      options.amqp, options.topology, absl::StrCat(options.name, "-", options.recovery.instance_id),
      internal::ClockOr(options.clock));
  auto alerts = std::make_unique<Alerter>(options.alerts);
  auto browser = std::make_unique<AmqpQueueBrowser>(
      options.amqp,
      options.dead_letters_name.empty()
          ? absl::StrCat(options.name, "-dead-letters-", options.recovery.instance_id)
          : options.dead_letters_name,
      internal::ClockOr(options.clock));
  Alerter& alerter = *alerts;
  ASSIGN_OR_RETURN(std::unique_ptr<Recovery> recovery,
                   Create(std::move(options), std::move(store), std::move(publisher),
                          std::move(alerts), std::move(browser)));
  MetricsRegistry& metrics =
      internal::MetricsOr(recovery->options_.metrics, recovery->own_metrics_);
  if (sqlite_store != nullptr) {
    operator_store = std::make_unique<OperatorStore>(*sqlite_store);
    recovery->sqlite_store_ = sqlite_store;
  }
  if (operator_store != nullptr) {
    operator_store->RegisterMetrics(metrics, internal::ClockOr(recovery->options_.clock));
    recovery->operator_store_ = std::move(operator_store);
  }
  alerter.RegisterMetrics(metrics);
  recovery->dead_letters_->RegisterMetrics(metrics);
  recovery->dead_letters_->KeepAlive(recovery->options_.amqp.heartbeat);
  recovery->alerter_ = &alerter;
  if (recovery->options_.start_workers) recovery->StartWorkers();
  return recovery;
}

absl::StatusOr<std::unique_ptr<Recovery>> Recovery::Create(
    Options options, std::unique_ptr<RecoveryRepository> store,
    std::unique_ptr<MessagePublisher> publisher, std::unique_ptr<AlertSink> alerts,
    std::unique_ptr<QueueBrowser> dead_letter_browser) {
  RETURN_IF_ERROR(Validate(options));
  return std::unique_ptr<Recovery>(new Recovery(std::move(options), std::move(store),
                                                std::move(publisher), std::move(alerts),
                                                std::move(dead_letter_browser)));
}

Recovery::Recovery(Options options, std::unique_ptr<RecoveryRepository> store,
                   std::unique_ptr<MessagePublisher> publisher, std::unique_ptr<AlertSink> alerts,
                   std::unique_ptr<QueueBrowser> dead_letter_browser)
    : options_(std::move(options)),
      store_(std::move(store)),
      publisher_(std::move(publisher)),
      alerts_(std::move(alerts)),
      signing_publisher_(*publisher_, options_.signing.keys()),
      loop_(*store_, signing_publisher_, *alerts_, internal::ClockOr(options_.clock),
            internal::MetricsOr(options_.metrics, own_metrics_), options_.recovery),
      dead_letter_browser_(std::move(dead_letter_browser)) {
  if (dead_letter_browser_ == nullptr) return;
  // Unless named otherwise, through the default exchange: a queue's name routes to it.
  std::vector<DeadLetters::Source> sources;
  for (const std::string& queue : options_.recovery.dead_letter_sources) {
    const auto exchange = options_.redrive_exchanges.find(queue);
    sources.push_back(
        {queue, exchange == options_.redrive_exchanges.end() ? "" : exchange->second});
  }
  dead_letters_ = std::make_unique<DeadLetters>(*dead_letter_browser_, std::move(sources));
  // Under the queue's lock, as a listing: not empty while another process looks.
  loop_.CountDeadLettersWith(
      [this](const std::string& queue) { return dead_letters_->Count(queue); });
  if (options_.sweep_dead_letters == 0) return;
  sweep_ = std::make_unique<DeadLetterSweep>(
      *dead_letters_, options_.signing.keys(), *store_,
      [this](const std::string& message_id, int64_t at_ms) {
        if (operator_store_ == nullptr) return;
        operator_store_->RecordSettledDeadLetterRemoved(message_id, at_ms).IgnoreError();  // logged
      },
      internal::ClockOr(options_.clock), internal::MetricsOr(options_.metrics, own_metrics_),
      DeadLetterSweep::Options{options_.recovery.dead_letter_sources, options_.sweep_dead_letters});
  loop_.AddHousekeeping([this] { sweep_->Run(); });
}

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
