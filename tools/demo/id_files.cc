#include "tools/demo/id_files.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

namespace outbox::demo {

bool ReadIds(const std::string& path, std::vector<std::string>* ids) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view id = absl::StripAsciiWhitespace(line);
    if (!id.empty()) ids->emplace_back(id);
  }
  return !in.bad();
}

bool WriteIds(const std::string& path, const std::vector<client::Created>& created) {
  std::ofstream out(path, std::ios::trunc);
  for (const client::Created& c : created) {
    if (!c.payment_id.empty()) out << c.payment_id << '\n';
  }
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace outbox::demo
