#include "shop.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/outbox_table.h"

namespace shop {

std::string OrderId(long number) {
  return absl::StrFormat("order-%06d", number);
}

const outbox::DbSchema& ShopSchema() {
  static const outbox::DbSchema schema{{{"orders and the outbox", [](SQLite::Database& db) {
                                           db.exec(
                                               "CREATE TABLE orders (order_id TEXT PRIMARY KEY, "
                                               "amount_minor INTEGER NOT NULL, "
                                               "placed_at INTEGER NOT NULL)");
                                           outbox::CreateOutboxTable(db);
                                         }}}};
  return schema;
}

const outbox::DbSchema& ShippingSchema() {
  static const outbox::DbSchema schema{{{"shipments and the inbox", [](SQLite::Database& db) {
                                           db.exec(
                                               "CREATE TABLE shipments (shipment_id TEXT PRIMARY "
                                               "KEY, order_id TEXT NOT NULL UNIQUE, "
                                               "booked_at INTEGER NOT NULL)");
                                           outbox::CreateInboxTable(db);
                                         }}}};
  return schema;
}

absl::StatusOr<Flags> Flags::Parse(int argc, char** argv,
                                   const std::map<std::string, std::string>& known) {
  Flags flags;
  flags.values_ = known;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) return absl::InvalidArgumentError("unexpected argument " + arg);
    arg = arg.substr(2);
    std::string value = "true";
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    if (known.count(arg) == 0) return absl::InvalidArgumentError("unknown flag --" + arg);
    flags.values_[arg] = value;
  }
  return flags;
}

std::map<std::string, std::string> Flags::WithSigning(std::map<std::string, std::string> known) {
  known.emplace("message_keys", "");
  known.emplace("allow_unsigned", "false");
  return known;
}

absl::StatusOr<outbox::Signing> Flags::Signing() const {
  const bool allow_unsigned = values_.count("allow_unsigned") > 0 && Switch("allow_unsigned");
  const std::string keys = values_.count("message_keys") > 0 ? Get("message_keys") : "";
  if (!keys.empty() && allow_unsigned) {
    return absl::InvalidArgumentError("--message_keys and --allow_unsigned exclude each other");
  }
  if (!keys.empty()) return outbox::Signing::FromKeyFile(keys);
  if (allow_unsigned) return outbox::Signing::Unsigned();
  return outbox::Signing();  // not chosen: the roles refuse to start
}

absl::StatusOr<long> Flags::Int(const std::string& name) const {
  long value = 0;
  if (!absl::SimpleAtoi(Get(name), &value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be a whole number >= 0, not '", Get(name), "'"));
  }
  return value;
}

absl::StatusOr<std::string> Flags::Required(const std::string& name) const {
  if (Get(name).empty()) return absl::InvalidArgumentError("--" + name + " is required");
  return Get(name);
}

absl::StatusOr<outbox::AmqpUrl> Flags::Url() const {
  absl::StatusOr<std::string> url = Required("amqp_url");
  if (!url.ok()) return url.status();
  return outbox::AmqpUrl::Parse(*url);
}

int Usage(const absl::Status& status, const char* usage) {
  std::fprintf(stderr, "%s\nusage: %s\n", status.ToString().c_str(), usage);
  return 2;
}

int Fail(const char* program, const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", program, status.ToString().c_str());
  return 1;
}

}  // namespace shop
