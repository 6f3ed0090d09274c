// The three services' libraries and the service kit linked whole into one
// binary: every object of every archive, referenced or not. A flag defined
// in two of them would fail this link (or abort at start with a duplicate
// flag), so flags stay in the binaries that parse them.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "accounting_service/accounting_options.h"
#include "payment_service/payment_options.h"
#include "recovery_service/recovery_options.h"

namespace outbox {
namespace {

TEST(ServiceLibrariesTest, DefineNoFlag) {
  // Abseil's own flags (--help and its kin) may be linked in; ours live in
  // the service folders and service_kit.
  std::vector<std::string> ours;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    const std::string file = flag->Filename();
    for (const char* folder : {"payment_service/", "accounting_service/", "recovery_service/",
                               "service_kit/", "shared/"}) {
      if (absl::StrContains(file, folder)) ours.push_back(absl::StrCat(name, " (", file, ")"));
    }
  }
  EXPECT_TRUE(ours.empty()) << "flags defined in a library: " << ours.front();
  for (const char* name :
       {"metrics_listen", "prefetch", "api_token_file", "payment_db", "amqp_url", "health_check"}) {
    EXPECT_EQ(absl::FindCommandLineFlag(name), nullptr) << name;
  }
}

TEST(ServiceLibrariesTest, TakeTheirSettingsAsPlainStructs) {
  EXPECT_EQ(payment::PaymentServiceOptions{}.listen, "127.0.0.1:50051");
  EXPECT_EQ(accounting::AccountingServiceOptions{}.listen, "127.0.0.1:50052");
  EXPECT_EQ(recovery::RecoveryServiceOptions{}.listen, "127.0.0.1:50053");
  EXPECT_TRUE(payment::PaymentServiceOptions{}.Validate().ok());
  EXPECT_TRUE(accounting::AccountingServiceOptions{}.Validate().ok());
}

}  // namespace
}  // namespace outbox
