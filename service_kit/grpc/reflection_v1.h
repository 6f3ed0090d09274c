#pragma once

// Server reflection v1 (grpc.reflection.v1.ServerReflection). gRPC 1.51's
// grpc++_reflection serves only v1alpha; newer clients (grpcurl, grpc-js
// tools, Postman) ask for v1 first. Same answers as gRPC's own v1alpha
// service, from the same generated descriptor pool: list_services,
// file_by_filename, file_containing_symbol, file_containing_extension and
// all_extension_numbers_of_type, each file with its dependencies; a name that
// is not in the pool gets an error_response NOT_FOUND on the stream.
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace google::protobuf {
class DescriptorPool;
}

namespace outbox {

class ReflectionV1Service final : public ::grpc::reflection::v1::ServerReflection::Service {
 public:
  // `pool` must outlive the service; the generated pool by default.
  explicit ReflectionV1Service(const google::protobuf::DescriptorPool* pool = nullptr);

  // The server's service names; read only after the server has started
  // (ServerInitializer::GetServiceList, owned by the server).
  void SetServiceList(const std::vector<std::string>* services) { services_ = services; }

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<::grpc::reflection::v1::ServerReflectionResponse,
                               ::grpc::reflection::v1::ServerReflectionRequest>* stream) override;

 private:
  grpc::Status Answer(const ::grpc::reflection::v1::ServerReflectionRequest& request,
                      ::grpc::reflection::v1::ServerReflectionResponse* response) const;

  const google::protobuf::DescriptorPool* const pool_;
  const std::vector<std::string>* services_ = nullptr;
};

// Adds the v1 service to `builder` (it lives as long as the server built).
void AddReflectionV1(grpc::ServerBuilder& builder);

}  // namespace outbox
