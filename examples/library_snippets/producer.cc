// The producer: an order and its OrderPlaced outbox row in one transaction,
// published right after the commit, closed by the consumer's reply; recovery
// runs in the same process. Writes from many threads share one commit.
#include "shared/base/status_macros.h"
#include "snippets.h"

namespace shop {

absl::Status PlaceOrders(const outbox::Config& shop, int orders) {
  OUTBOX_ASSIGN_OR_RETURN(auto producer, outbox::Producer::Start(shop));
  for (int i = 0; i < orders; ++i) {
    const std::string order_id = "o-" + std::to_string(i);
    auto written = producer->Write(
        outbox::MessageSpec::Of("OrderPlaced", order_id, order_id), [&](SQLite::Database& db) {
          SQLite::Statement insert(db, "INSERT INTO orders VALUES (?, 1250)");
          insert.bind(1, order_id);
          insert.exec();
          return absl::OkStatus();
        });
    OUTBOX_RETURN_IF_ERROR(written.status());  // on an error nothing was written
  }
  // Rows close only while the producer reads the replies: wait for them.
  OUTBOX_RETURN_IF_ERROR(producer->WaitUntilClosed(absl::Now() + absl::Minutes(1)).status());
  producer->Stop();
  return absl::OkStatus();
}

}  // namespace shop
