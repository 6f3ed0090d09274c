#include "service_kit/grpc/reflection_v1.h"

#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "service_kit/grpc/grpc_server.h"
#include "service_kit/grpc/grpc_status.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

namespace rv1 = ::grpc::reflection::v1;

class ReflectionV1Test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = StartGrpcServer("127.0.0.1:0", {}, &port_);
    ASSERT_OK(server);
    server_ = std::move(*server);
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (server_) ShutdownGrpcServer(*server_);
  }

  // Sends each request on one stream and returns the answers in order.
  std::vector<rv1::ServerReflectionResponse> Ask(
      const std::vector<rv1::ServerReflectionRequest>& requests) {
    auto stub = rv1::ServerReflection::NewStub(channel_);
    grpc::ClientContext ctx;
    auto stream = stub->ServerReflectionInfo(&ctx);
    std::vector<rv1::ServerReflectionResponse> out;
    for (const auto& r : requests) {
      EXPECT_TRUE(stream->Write(r));
      rv1::ServerReflectionResponse resp;
      EXPECT_TRUE(stream->Read(&resp));
      out.push_back(resp);
    }
    stream->WritesDone();
    EXPECT_OK(FromGrpcStatus(stream->Finish()));
    return out;
  }

  static rv1::ServerReflectionRequest Symbol(const std::string& symbol) {
    rv1::ServerReflectionRequest r;
    r.set_file_containing_symbol(symbol);
    return r;
  }

  // The file names in a file_descriptor_response, and whether one declares `service`.
  static std::set<std::string> Files(const rv1::ServerReflectionResponse& resp,
                                     const std::string& service, bool* declares) {
    std::set<std::string> names;
    *declares = false;
    for (const std::string& bytes : resp.file_descriptor_response().file_descriptor_proto()) {
      google::protobuf::FileDescriptorProto file;
      EXPECT_TRUE(file.ParseFromString(bytes));
      names.insert(file.name());
      for (const auto& s : file.service()) {
        *declares |= absl::StrCat(file.package(), ".", s.name()) == service;
      }
    }
    return names;
  }

  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ReflectionV1Test, EveryListedServiceResolvesToItsFile) {
  rv1::ServerReflectionRequest list;
  list.set_list_services("");
  const auto listed = Ask({list});
  std::vector<std::string> names;
  for (const auto& s : listed[0].list_services_response().service()) names.push_back(s.name());
  const std::set<std::string> set(names.begin(), names.end());
  EXPECT_TRUE(set.count("grpc.health.v1.Health"));
  EXPECT_TRUE(set.count("grpc.reflection.v1.ServerReflection"));
  EXPECT_TRUE(set.count("grpc.reflection.v1alpha.ServerReflection"));

  std::vector<rv1::ServerReflectionRequest> lookups;
  for (const std::string& name : names) lookups.push_back(Symbol(name));
  const auto answers = Ask(lookups);
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_FALSE(answers[i].has_error_response())
        << names[i] << ": " << answers[i].error_response().error_message();
    bool declares = false;
    Files(answers[i], names[i], &declares);
    EXPECT_TRUE(declares) << names[i];
    EXPECT_EQ(answers[i].original_request().file_containing_symbol(), names[i]);
  }
}

TEST_F(ReflectionV1Test, FilesComeWithTheirDependenciesAndUnknownNamesAreNotFound) {
  rv1::ServerReflectionRequest by_name;
  by_name.set_file_by_filename("grpc/health/v1/health.proto");
  rv1::ServerReflectionRequest method = Symbol("grpc.health.v1.Health.Check");
  rv1::ServerReflectionRequest unknown = Symbol("no.such.Service");
  rv1::ServerReflectionRequest no_file;
  no_file.set_file_by_filename("no/such.proto");
  rv1::ServerReflectionRequest extension;
  extension.mutable_file_containing_extension()->set_containing_type(
      "grpc.health.v1.HealthCheckRequest");
  extension.mutable_file_containing_extension()->set_extension_number(100);
  rv1::ServerReflectionRequest numbers;
  numbers.set_all_extension_numbers_of_type("grpc.health.v1.HealthCheckRequest");
  rv1::ServerReflectionRequest no_type;
  no_type.set_all_extension_numbers_of_type("no.such.Type");
  rv1::ServerReflectionRequest empty;

  const auto a = Ask({by_name, method, unknown, no_file, extension, numbers, no_type, empty});
  bool declares = false;
  EXPECT_EQ(Files(a[0], "grpc.health.v1.Health", &declares),
            std::set<std::string>{"grpc/health/v1/health.proto"});
  EXPECT_TRUE(declares);
  Files(a[1], "grpc.health.v1.Health", &declares);
  EXPECT_TRUE(declares) << "a method resolves to its service's file";
  for (int i : {2, 3, 4, 6}) {
    EXPECT_EQ(a[i].error_response().error_code(), grpc::StatusCode::NOT_FOUND) << i;
  }
  EXPECT_FALSE(a[5].has_error_response());
  EXPECT_EQ(a[5].all_extension_numbers_response().base_type_name(),
            "grpc.health.v1.HealthCheckRequest");
  EXPECT_EQ(a[7].error_response().error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(ReflectionV1Test, HealthIsServing) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckResponse resp;
  ASSERT_OK(FromGrpcStatus(health->Check(&ctx, {}, &resp)));
  EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace outbox
