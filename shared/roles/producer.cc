#include "shared/roles/producer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/base/internal/mutex.h"
#include "shared/base/status_macros.h"
#include "shared/roles/config.h"
#include "shared/roles/internal/producer_links.h"
#include "shared/roles/internal/role_options.h"
#include "shared/roles/recovery.h"

namespace outbox {
namespace {

absl::Status Validate(Producer::Options& options) {
  RETURN_IF_ERROR(internal::ValidateProducerLinks(options, "Producer"));
  if (absl::Status s = options.group_commit.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Producer: options.group_commit.", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Duration HandOverAfter(const RetryPolicy& retry) {
  absl::Duration after = retry.DelayAfter(1);
  for (const auto& topic : retry.topics) {
    after = std::min(after, retry.ForTopic(topic.first).DelayAfter(1));
  }
  return after;
}

absl::StatusOr<std::unique_ptr<Producer>> Producer::Start(SqliteFile& file, Options options) {
  RETURN_IF_ERROR(Validate(options));
  internal::ProducerLinks links = internal::DialProducerLinks(options);
  ASSIGN_OR_RETURN(
      std::unique_ptr<Producer> producer,
      Create(file, std::move(options), std::move(links.publisher), std::move(links.replies)));
  producer->StartWorkers();
  return producer;
}

absl::StatusOr<std::unique_ptr<Producer>> Producer::Start(const Config& config) {
  if (config.db.empty()) return absl::InvalidArgumentError("Producer: config.db is required");
  if (config.schema == nullptr) {
    return absl::InvalidArgumentError("Producer: config.schema is required (its outbox tables)");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteFile> file,
                   OpenSqliteFile(config.db, config.db_options, config.schema));
  ASSIGN_OR_RETURN(std::unique_ptr<Producer> producer, Start(*file, ProducerOptionsOf(config)));
  producer->own_file_ = std::move(file);
  if (config.recovery_in_process) {
    ASSIGN_OR_RETURN(producer->recovery_, Recovery::Start(RecoveryOptionsOf(config)));
  }
  return producer;
}

absl::StatusOr<std::unique_ptr<Producer>> Producer::Create(
    SqliteFile& file, Options options, std::unique_ptr<MessagePublisher> publisher,
    std::unique_ptr<MessageConsumer> replies) {
  RETURN_IF_ERROR(Validate(options));
  return std::unique_ptr<Producer>(
      new Producer(file, std::move(options), std::move(publisher), std::move(replies)));
}

Producer::Producer(SqliteFile& file, Options options, std::unique_ptr<MessagePublisher> publisher,
                   std::unique_ptr<MessageConsumer> replies)
    : options_(std::move(options)),
      publisher_(std::move(publisher)),
      replies_(std::move(replies)),
      signing_publisher_(*publisher_, options_.signing.keys()),
      outbox_(file, internal::ClockOr(options_.clock), options_.retry),
      relay_(signing_publisher_, outbox_, internal::ClockOr(options_.clock),
             internal::MetricsOr(options_.metrics, own_metrics_),
             internal::RelayOptionsOf(options_)),
      writer_(file, outbox_, relay_, internal::ClockOr(options_.clock),
              internal::MetricsOr(options_.metrics, own_metrics_), options_.group_commit),
      acks_(*replies_, writer_, options_.decode_reply,
            internal::MetricsOr(options_.metrics, own_metrics_),
            internal::AckListenerOptionsOf(options_)) {
  outbox_.set_on_closed(options_.on_closed);
  writer_.Start();
}

Producer::~Producer() {
  Stop();
}

void Producer::StartWorkers() {
  relay_.Start();
  acks_.Start();
}

void Producer::Stop() {
  if (recovery_ != nullptr) recovery_->Stop();
  acks_.Stop();    // it records acknowledgements through the writer
  writer_.Stop();  // it hands what it commits to the relay
  relay_.Stop();
}

void Producer::WriteAsync(MessageSpec spec, BusinessWrite business, GroupWriter::WriteDone done) {
  if (spec.message_id.empty()) spec.message_id = ids_.NewId();
  if (spec.topic.empty()) spec.topic = options_.queue;
  if (spec.reply_to.empty()) spec.reply_to = options_.reply_queue;
  writer_.WriteAsync(std::move(spec), std::move(business), std::move(done));
}

absl::StatusOr<std::string> Producer::Write(MessageSpec spec, const BusinessWrite& business) {
  absl::StatusOr<OutboxMessage> written;
  Notification done;  // outbox::Notification: TSan sees it (shared/base/internal/mutex.h)
  WriteAsync(std::move(spec), business, [&](absl::StatusOr<OutboxMessage> row) {
    written = std::move(row);
    done.Notify();
  });
  done.WaitForNotification();
  if (!written.ok()) return written.status();
  return written->message_id;
}

}  // namespace outbox
