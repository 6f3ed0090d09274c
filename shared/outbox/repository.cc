#include "shared/outbox/repository.h"

namespace outbox {

Counter& StoreWriteFailures(MetricsRegistry& metrics, const std::string& write) {
  return metrics.AddCounter("outbox_store_write_failures_total",
                            "writes to the outbox table that failed and were given up (logged)",
                            {{"write", write}});
}

}  // namespace outbox
