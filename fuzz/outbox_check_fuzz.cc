// outbox_check on a hostile file: the input is written out and audited as
// both the payment db and the accounting db. A report or an error status are
// both fine; a crash is not.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/time/time.h"
#include "checker/consistency_check.h"
#include "fuzz/fuzz_check.h"

namespace {

// One private directory per process, reused for every input.
const std::string& Dir() {
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/outbox_check_fuzz_XXXXXX";
    FUZZ_CHECK(mkdtemp(tmpl.data()) != nullptr);
    auto* made = new std::string(tmpl);
    std::atexit([] { std::filesystem::remove_all(Dir()); });
    return made;
  }();
  return *dir;
}

void WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  // A stale -wal or -shm from the previous input would be read with this one.
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(f != nullptr);
  FUZZ_CHECK(size == 0 || std::fwrite(data, 1, size, f) == size);
  FUZZ_CHECK(std::fclose(f) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  outbox::checker::CheckConfig config;
  config.payment_db = Dir() + "/payment.db";
  config.accounting_db = Dir() + "/accounting.db";
  WriteFile(config.payment_db, data, size);
  WriteFile(config.accounting_db, data, size);
  auto report = outbox::checker::RunChecks(config, absl::FromUnixMillis(1'700'000'000'000));
  if (report.ok()) {
    // A report counts rows; it never counts below zero.
    FUZZ_CHECK(report->counts.payments >= 0 && report->counts.vouchers >= 0);
  }
  return 0;
}
