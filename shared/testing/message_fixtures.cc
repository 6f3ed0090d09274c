#include "shared/testing/message_fixtures.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace outbox::testing {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

absl::StatusOr<Delivery> ReadMessageFixture(const std::string& dir, const std::string& name) {
  const std::string base = absl::StrCat(dir, "/", name);
  auto body = ReadFile(base + ".bin");
  if (!body.ok()) return body.status();
  auto properties = ReadFile(base + ".txt");
  if (!properties.ok()) return properties.status();
  Delivery d;
  d.body = std::move(body).value();
  const std::string header = "header.";
  for (absl::string_view line : absl::StrSplit(*properties, '\n', absl::SkipEmpty())) {
    if (line.front() == '#') continue;
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits('=', 1));
    const std::string key(kv.first), value(kv.second);
    if (key == "message_id") {
      d.message_id = value;
    } else if (key == "type") {
      d.type = value;
    } else if (key == "reply_to") {
      d.reply_to = value;
    } else if (key == "content_type" || key == "delivery_mode") {
      // Sent by every build; no consumer reads them.
    } else if (key == header + "traceparent") {
      d.traceparent = value;
    } else if (key == header + kSignatureHeader) {
      d.signature = value;
    } else if (key == header + kShardKeyHeader) {
      d.shard_key = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(base, ".txt: unknown key '", key, "'"));
    }
  }
  return d;
}

absl::StatusOr<MessageKeys> ReadFixtureKeys(const std::string& dir) {
  auto text = ReadFile(dir + "/fixture.keys");
  if (!text.ok()) return text.status();
  return MessageKeys::Parse(*text);
}

}  // namespace outbox::testing
