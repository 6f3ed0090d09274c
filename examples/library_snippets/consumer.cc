// The consumer: books one shipment per order (Shipping, shipping.h), exactly
// once, and answers every message, new or duplicate, on its reply_to.
#include "shared/base/status_macros.h"
#include "shipping.h"
#include "snippets.h"

namespace shop {

absl::Status ShipOrders(const Setup& setup, int orders) {
  OUTBOX_ASSIGN_OR_RETURN(auto file,
                          outbox::OpenSqliteFile(setup.shipping_db, {}, &ShippingSchema()));
  // A copy that comes after its id left the inbox is still found by its
  // order: shipments.order_id is UNIQUE and names the shipment it made.
  outbox::SqliteHandlerOptions handler;
  handler.applied_by_key = outbox::AppliedByKey{"shipments", "order_id", "shipment_id"};
  Shipping shipping(*file, outbox::SystemClock::Get(), handler);
  outbox::Config config = ShopOutbox(setup);
  // Processed ids older than this leave the inbox (30 days by default):
  // longer than recovery's retries and an operator's re-drive take.
  config.consumer.inbox_retention = absl::Hours(24 * 7);
  OUTBOX_ASSIGN_OR_RETURN(auto consumer, outbox::Consumer::Start(shipping, config));
  while (consumer->booked() + consumer->duplicates() < orders)
    absl::SleepFor(absl::Milliseconds(10));
  consumer->Stop();  // waits for the last replies' confirms, then acks
  return absl::OkStatus();
}

}  // namespace shop
