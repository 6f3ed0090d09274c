// The consumer: books one shipment per order (ShipOrder, shipping.h), exactly
// once, and answers every message, new or duplicate, on its reply_to.
#include "shared/base/status_macros.h"
#include "shipping.h"
#include "snippets.h"

namespace shop {

absl::Status ShipOrders(const outbox::Config& shop, const std::string& shipping_db, int orders) {
  OUTBOX_ASSIGN_OR_RETURN(auto file, outbox::OpenSqliteFile(shipping_db, {}, &ShippingSchema()));
  outbox::SqliteApply shipping(*file, "OrderPlaced", ShipOrder);
  OUTBOX_ASSIGN_OR_RETURN(auto consumer, outbox::Consumer::Start(shipping, shop));
  while (consumer->booked() + consumer->duplicates() < orders)
    absl::SleepFor(absl::Milliseconds(10));
  consumer->Stop();  // waits for the last replies' confirms, then acks
  return absl::OkStatus();
}

}  // namespace shop
