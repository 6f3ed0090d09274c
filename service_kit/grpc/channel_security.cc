#include "service_kit/grpc/channel_security.h"

#include <utility>
#include <vector>

#include <grpcpp/support/client_interceptor.h>

#include "absl/strings/str_cat.h"

namespace outbox {
namespace {

// Adds the authorization header to each call's initial metadata.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;  // owned by the factory, which the channel keeps
};

class BearerTokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(const std::string& token)
      : header_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFrom(
    const TlsClientFiles& files) {
  if (!files.enabled()) return grpc::InsecureChannelCredentials();
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file go together (the client certificate and its key)");
  }
  grpc::SslCredentialsOptions options;
  if (!files.ca_file.empty()) {
    auto ca = ReadSmallFile(files.ca_file, "tls_ca_file");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  if (!files.cert_file.empty()) {
    auto cert = ReadSmallFile(files.cert_file, "tls_cert_file");
    if (!cert.ok()) return cert.status();
    auto key = ReadSmallFile(files.key_file, "tls_key_file");
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> CreateChannelWithToken(
    const std::string& addr, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, const std::string& token) {
  if (token.empty()) return grpc::CreateCustomChannel(addr, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<BearerTokenInterceptorFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(addr, credentials, args,
                                                                 std::move(factories));
}

}  // namespace outbox
