// The consumer on PostgreSQL: books one shipment per order (ShipOrder,
// shipping.h) exactly once, in a database of its own, and answers every
// message, new or duplicate, on its reply_to.
#include <memory>
#include <string>

#include "shared/base/status_macros.h"
#include "shared/postgres/pg_session.h"
#include "shared/roles/consumer.h"
#include "shipping.h"
#include "snippets.h"

namespace shop {

absl::Status ShipOrders(const outbox::Config& shop, const std::string& shipping_db, int orders) {
  // The consumer's database, not the producer's config.db.
  OUTBOX_ASSIGN_OR_RETURN(std::unique_ptr<outbox::PgSession> session,
                          outbox::PgSession::Open(shipping_db));
  OUTBOX_RETURN_IF_ERROR(outbox::UpgradePgSchema(*session, ShippingSchema()));
  outbox::PgHandlerOptions options;  // a copy is known by its order too, once its id is pruned
  options.applied_by_key = outbox::AppliedByKey{"shipments", "order_id", "shipment_id"};
  outbox::PgApply shipping(*session, "OrderPlaced", ShipOrder, options);  // outlives the consumer
  OUTBOX_ASSIGN_OR_RETURN(auto consumer, outbox::Consumer::Start(shipping, shop));
  while (consumer->booked() + consumer->duplicates() < orders)
    absl::SleepFor(absl::Milliseconds(10));
  consumer->Stop();  // waits for the last replies' confirms, then acks
  return absl::OkStatus();
}

}  // namespace shop
