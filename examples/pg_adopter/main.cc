// A producer and a consumer's handler on PostgreSQL, over the installed
// package: the producer writes an order row and its OrderPlaced message in
// one transaction; the handler books each OrderPlaced once in its own
// table (the consumer role, outbox::Consumer, would drive it). Run against
// a server and a broker, it makes the tables and writes one order:
//   pg_adopter CONNINFO AMQP_URL KEY_FILE
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/amqp/amqp_url.h"
#include "shared/outbox/signing.h"
#include "shared/postgres/pg_message_handler.h"
#include "shared/postgres/pg_producer.h"

namespace {

absl::StatusOr<std::string> ShipOrder(outbox::PgConnection& tx, const outbox::Delivery& order) {
  absl::StatusOr<outbox::PgResult> inserted = tx.Query(
      "INSERT INTO shipments (order_id) VALUES ($1) ON CONFLICT DO NOTHING", {order.shard_key});
  if (!inserted.ok()) return inserted.status();
  return "shipment-" + order.shard_key;
}

absl::Status Run(const std::string& conninfo, const std::string& amqp, const std::string& keys) {
  absl::StatusOr<std::unique_ptr<outbox::PgSession>> session = outbox::PgSession::Open(conninfo);
  if (!session.ok()) return session.status();
  absl::Status schema = (*session)->Transaction("schema", [](outbox::PgConnection& tx) {
    absl::Status status = outbox::CreatePgOutboxTables(tx);
    if (status.ok()) status = outbox::CreatePgInboxTable(tx);
    if (status.ok()) {
      status = tx.Exec("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY)");
    }
    if (status.ok()) {
      status = tx.Exec("CREATE TABLE IF NOT EXISTS shipments (order_id TEXT PRIMARY KEY)");
    }
    return status;
  });
  if (!schema.ok()) return schema;

  absl::StatusOr<outbox::Signing> signing = outbox::Signing::FromKeyFile(keys);
  if (!signing.ok()) return signing.status();
  absl::StatusOr<outbox::AmqpUrl> url = outbox::AmqpUrl::Parse(amqp);
  if (!url.ok()) return url.status();
  outbox::PgProducer::Options options;
  options.amqp = *url;
  options.queue = "pg_adopter.orders";
  options.signing = *signing;
  absl::StatusOr<std::unique_ptr<outbox::PgProducer>> producer =
      outbox::PgProducer::Start(conninfo, options);
  if (!producer.ok()) return producer.status();
  absl::StatusOr<std::string> id = (*producer)->Write(
      outbox::MessageSpec::Of("OrderPlaced", "o-1", "{}"),
      [](outbox::PgConnection& tx) { return tx.Exec("INSERT INTO orders (id) VALUES ('o-1')"); });
  (*producer)->Stop();
  if (!id.ok()) return id.status();

  outbox::PgApply shipping(**session, "OrderPlaced", ShipOrder);
  std::printf("wrote %s\n", id->c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: pg_adopter CONNINFO AMQP_URL KEY_FILE\n");
    return 2;
  }
  absl::Status status = Run(argv[1], argv[2], argv[3]);
  if (!status.ok()) {
    std::fprintf(stderr, "pg_adopter: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
