#include "shared/outbox/signing.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/observability/log.h"

namespace outbox {

Signing Signing::With(MessageKeys keys) {
  Signing s;
  s.chosen_ = true;
  s.keys_ = std::make_shared<const MessageKeys>(std::move(keys));
  return s;
}

absl::StatusOr<Signing> Signing::FromKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("message keys: cannot read '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<MessageKeys> keys = MessageKeys::Parse(text.str());
  if (!keys.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("message keys: '", path, "' ", keys.status().message()));
  }
  struct stat st = {};
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0) {
    LogWarning("message_keys_file_too_open",
               {KV("warning", absl::StrCat("message keys: '", path,
                                           "' is readable by every user; chmod 600 it (or 640 "
                                           "for a group)"))});
  }
  return With(*std::move(keys));
}

Signing Signing::Unsigned() {
  Signing s;
  s.chosen_ = true;
  return s;
}

absl::Status Signing::Required(absl::string_view role) const {
  if (chosen_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(role,
                   ": no message keys. Set options.signing to Signing::With(keys) or "
                   "Signing::FromKeyFile(path), or to Signing::Unsigned() for a broker nobody "
                   "else can publish to"));
}

std::string Signing::Describe() const {
  if (keys_ != nullptr) return absl::StrCat("key ", keys_->signing_key_id());
  return chosen_ ? "unsigned" : "not chosen";
}

}  // namespace outbox
