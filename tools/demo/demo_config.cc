#include "tools/demo/demo_config.h"

namespace outbox::demo {

client::RetryPolicy FewTries() {
  client::RetryPolicy p;
  p.max_attempts = 5;
  p.first_backoff = absl::Milliseconds(100);
  p.call_timeout = kCallTimeout;
  return p;
}

client::RetryPolicy UntilTimeout(absl::Duration timeout) {
  client::RetryPolicy p;
  p.max_attempts = 0;
  p.retry_for = timeout;
  p.retry_unknown = true;
  p.first_backoff = absl::Milliseconds(50);
  p.call_timeout = kCallTimeout;
  return p;
}

}  // namespace outbox::demo
