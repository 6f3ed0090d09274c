#include "shared/roles/config.h"

#include "shared/roles/internal/producer_links.h"

namespace outbox {
namespace {

// `role` (a copy of the block's member for that role) with the settings
// every role repeats taken from the block.
template <typename Options>
Options WithShared(const Config& config, Options role) {
  role.amqp = config.amqp;
  role.signing = config.signing;
  role.queue = config.queue;
  role.reply_queue = config.reply_queue;
  role.clock = config.clock;
  role.metrics = config.metrics;
  return role;
}

}  // namespace

Producer::Options ProducerOptionsOf(const Config& config) {
  Producer::Options options = WithShared(config, config.producer);
  options.retry = config.retry;
  options.on_closed = config.on_closed;
  return options;
}

Consumer::Options ConsumerOptionsOf(const Config& config) {
  return WithShared(config, config.consumer);
}

Recovery::Options RecoveryOptionsOf(const Config& config) {
  Recovery::Options options = WithShared(config, config.recovery);
  options.recovery.retry = config.retry;
  options.on_closed = config.on_closed;
  options.db = config.db;
  if (options.producer_db.schema == nullptr) options.producer_db.schema = config.schema;
  options.db_options = config.db_options;
  if (options.recovery.instance_id.empty()) options.recovery.instance_id = config.instance_id;
  if (options.recovery.instance_id.empty()) {
    options.recovery.instance_id = internal::DefaultInstanceId(config.queue);
  }
  return options;
}

}  // namespace outbox
