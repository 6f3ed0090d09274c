// The producer on PostgreSQL: an order and its OrderPlaced outbox row in one
// transaction, published right after the commit, closed by the consumer's
// reply; recovery runs in the same process. Writes from many threads share
// one commit.
#include <string>

#include "shared/base/status_macros.h"
#include "shared/postgres/pg_producer.h"
#include "snippets.h"

namespace shop {

absl::Status PlaceOrders(const outbox::Config& shop, int orders) {
  // Brings the database to the library's schema, then to ShopSchema().
  OUTBOX_ASSIGN_OR_RETURN(auto producer, outbox::PgProducer::Start(shop, &ShopSchema()));
  for (int i = 0; i < orders; ++i) {
    const std::string order_id = "o-" + std::to_string(i);
    auto insert_order = [&](outbox::PgConnection& conn) {
      // Parameters are text (PgParam, an optional string): numbers as std::to_string.
      return conn.Query("INSERT INTO orders VALUES ($1, $2)", {order_id, std::to_string(1250)})
          .status();  // Query returns the rows, a StatusOr<PgResult>
    };
    auto written =
        producer->Write(outbox::MessageSpec::Of("OrderPlaced", order_id, order_id), insert_order);
    OUTBOX_RETURN_IF_ERROR(written.status());  // on an error nothing was written
  }
  // Rows close only while the producer reads the replies: wait for them.
  OUTBOX_RETURN_IF_ERROR(producer->WaitUntilClosed(absl::Now() + absl::Minutes(1)).status());
  producer->Stop();
  return absl::OkStatus();
}

}  // namespace shop
