// Settings read from the environment: the EnvOr* defaults (durations in
// Abseil's format, integers, doubles) and --sqlite_synchronous.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "fuzz/fuzz_check.h"
#include "shared/runtime/internal/env.h"
#include "shared/sqlite/sqlite_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string value(reinterpret_cast<const char*>(data), size);
  auto durability = outbox::ParseDurability(value);
  FUZZ_CHECK(durability.ok() || absl::IsInvalidArgument(durability.status()));

  // The environment holds C strings: what follows a NUL never arrives.
  const std::string env_value = value.substr(0, value.find('\0'));
  constexpr char kName[] = "OUTBOX_FUZZ_SETTING";
  FUZZ_CHECK(setenv(kName, env_value.c_str(), 1) == 0);
  const absl::Duration fallback = absl::Seconds(7);
  const absl::Duration d = outbox::EnvOrDuration(kName, fallback);
  absl::Duration direct;
  if (absl::ParseDuration(env_value, &direct)) {
    FUZZ_CHECK(d == direct);
  } else {
    FUZZ_CHECK(d == fallback);
  }
  (void)outbox::EnvOrInt(kName, 42);
  (void)outbox::EnvOrDouble(kName, 0.5);
  unsetenv(kName);
  return 0;
}
