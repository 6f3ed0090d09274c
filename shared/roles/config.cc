#include "shared/roles/config.h"

#include <unistd.h>

#include <climits>

#include "absl/strings/str_cat.h"

namespace outbox {
namespace {

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "host";
  return name;
}

}  // namespace

Producer::Options ProducerOptionsOf(const Config& config) {
  Producer::Options options = config.producer;
  options.amqp = config.amqp;
  options.signing = config.signing;
  options.queue = config.queue;
  options.reply_queue = config.reply_queue;
  options.retry = config.retry;
  options.on_closed = config.on_closed;
  options.clock = config.clock;
  options.metrics = config.metrics;
  return options;
}

Consumer::Options ConsumerOptionsOf(const Config& config) {
  Consumer::Options options = config.consumer;
  options.amqp = config.amqp;
  options.signing = config.signing;
  options.queue = config.queue;
  options.reply_queue = config.reply_queue;
  options.clock = config.clock;
  options.metrics = config.metrics;
  return options;
}

Recovery::Options RecoveryOptionsOf(const Config& config) {
  Recovery::Options options = config.recovery;
  options.amqp = config.amqp;
  options.signing = config.signing;
  options.queue = config.queue;
  options.reply_queue = config.reply_queue;
  options.recovery.retry = config.retry;
  options.on_closed = config.on_closed;
  options.clock = config.clock;
  options.metrics = config.metrics;
  options.db = config.db;
  if (options.producer_db.schema == nullptr) options.producer_db.schema = config.schema;
  options.db_options = config.db_options;
  if (options.recovery.instance_id.empty()) options.recovery.instance_id = config.instance_id;
  if (options.recovery.instance_id.empty()) {
    options.recovery.instance_id = absl::StrCat(config.queue, "-", HostName(), "-", getpid());
  }
  return options;
}

}  // namespace outbox
