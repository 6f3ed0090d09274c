#include "service_kit/grpc/reflection_v1.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/impl/server_initializer.h>

#include <set>

namespace outbox {
namespace {

namespace rv1 = ::grpc::reflection::v1;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

// Adds `file` and, transitively, what it imports; each file once per answer.
void AddFileWithDependencies(const FileDescriptor* file, std::set<std::string>* seen,
                             rv1::FileDescriptorResponse* out) {
  if (!seen->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(out->add_file_descriptor_proto());
  for (int i = 0; i < file->dependency_count(); ++i) {
    AddFileWithDependencies(file->dependency(i), seen, out);
  }
}

grpc::Status FileAnswer(const FileDescriptor* file, rv1::ServerReflectionResponse* response) {
  std::set<std::string> seen;
  AddFileWithDependencies(file, &seen, response->mutable_file_descriptor_response());
  return grpc::Status::OK;
}

// Registers the service on the server being built and hands it the server's
// service list once the server has started.
class ReflectionV1Plugin final : public grpc::ServerBuilderPlugin {
 public:
  std::string name() override { return "outbox_reflection_v1"; }
  void InitServer(grpc::ServerInitializer* si) override { si->RegisterService(service_); }
  void Finish(grpc::ServerInitializer* si) override {
    service_->SetServiceList(si->GetServiceList());
  }
  void ChangeArguments(const std::string&, void*) override {}
  bool has_sync_methods() const override { return true; }
  bool has_async_methods() const override { return false; }

 private:
  std::shared_ptr<ReflectionV1Service> service_ = std::make_shared<ReflectionV1Service>();
};

// The public way to give one builder (not every builder in the process) a
// plugin.
class ReflectionV1Option final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ReflectionV1Plugin>());
  }
};

}  // namespace

ReflectionV1Service::ReflectionV1Service(const google::protobuf::DescriptorPool* pool)
    : pool_(pool != nullptr ? pool : google::protobuf::DescriptorPool::generated_pool()) {}

grpc::Status ReflectionV1Service::ServerReflectionInfo(
    grpc::ServerContext*,
    grpc::ServerReaderWriter<rv1::ServerReflectionResponse, rv1::ServerReflectionRequest>* stream) {
  rv1::ServerReflectionRequest request;
  while (stream->Read(&request)) {
    rv1::ServerReflectionResponse response;
    const grpc::Status status = Answer(request, &response);
    if (!status.ok()) {
      response.clear_message_response();
      response.mutable_error_response()->set_error_code(status.error_code());
      response.mutable_error_response()->set_error_message(status.error_message());
    }
    response.set_valid_host(request.host());
    *response.mutable_original_request() = request;
    if (!stream->Write(response)) break;
  }
  return grpc::Status::OK;
}

grpc::Status ReflectionV1Service::Answer(const rv1::ServerReflectionRequest& request,
                                         rv1::ServerReflectionResponse* response) const {
  switch (request.message_request_case()) {
    case rv1::ServerReflectionRequest::kListServices: {
      if (services_ == nullptr) return {grpc::StatusCode::NOT_FOUND, "Services not found."};
      for (const std::string& name : *services_) {
        response->mutable_list_services_response()->add_service()->set_name(name);
      }
      return grpc::Status::OK;
    }
    case rv1::ServerReflectionRequest::kFileByFilename: {
      const FileDescriptor* file = pool_->FindFileByName(request.file_by_filename());
      if (file == nullptr) return {grpc::StatusCode::NOT_FOUND, "File not found."};
      return FileAnswer(file, response);
    }
    case rv1::ServerReflectionRequest::kFileContainingSymbol: {
      const FileDescriptor* file =
          pool_->FindFileContainingSymbol(request.file_containing_symbol());
      if (file == nullptr) return {grpc::StatusCode::NOT_FOUND, "Symbol not found."};
      return FileAnswer(file, response);
    }
    case rv1::ServerReflectionRequest::kFileContainingExtension: {
      const auto& ext = request.file_containing_extension();
      const Descriptor* type = pool_->FindMessageTypeByName(ext.containing_type());
      if (type == nullptr) return {grpc::StatusCode::NOT_FOUND, "Type not found."};
      const FieldDescriptor* field = pool_->FindExtensionByNumber(type, ext.extension_number());
      if (field == nullptr) return {grpc::StatusCode::NOT_FOUND, "Extension not found."};
      return FileAnswer(field->file(), response);
    }
    case rv1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const Descriptor* type =
          pool_->FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) return {grpc::StatusCode::NOT_FOUND, "Type not found."};
      std::vector<const FieldDescriptor*> extensions;
      pool_->FindAllExtensions(type, &extensions);
      auto* out = response->mutable_all_extension_numbers_response();
      out->set_base_type_name(type->full_name());
      for (const FieldDescriptor* e : extensions) out->add_extension_number(e->number());
      return grpc::Status::OK;
    }
    case rv1::ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET: break;
  }
  return {grpc::StatusCode::UNIMPLEMENTED, "no request in message_request"};
}

void AddReflectionV1(grpc::ServerBuilder& builder) {
  builder.SetOption(std::make_unique<ReflectionV1Option>());
}

}  // namespace outbox
