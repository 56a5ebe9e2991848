#include "server/api/reflection_v1.h"

#include <string_view>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/impl/server_initializer.h"
#include "spdlog/spdlog.h"
#include "weightpath/v1/fleet_admin.pb.h"

namespace weightpath::server {

// A generated .pb.cc adds its file to generated_pool() from a static
// initializer, which runs only if the static-library link keeps the object,
// that is if the binary refers to something in it. fleet_admin.proto declares
// FleetAdmin and no message, and the Health service is gRPC's own (it never
// touches health.pb.cc), so nothing refers to those two files and reflection
// could list their services but not describe them. These references keep
// both objects (and so both files) in every binary that links this one;
// external linkage, so the compiler cannot drop them as unused.
extern const void* const kServiceFileDescriptorTables[];
const void* const kServiceFileDescriptorTables[] = {
    &descriptor_table_weightpath_2fv1_2ffleet_5fadmin_2eproto,
    &descriptor_table_grpc_2fhealth_2fv1_2fhealth_2eproto,
};

namespace {

namespace reflection = ::grpc::reflection::v1;
using google::protobuf::FileDescriptor;

void SetError(grpc::StatusCode code, std::string message,
              reflection::ServerReflectionResponse* response) {
  reflection::ErrorResponse* error = response->mutable_error_response();
  error->set_error_code(static_cast<int32_t>(code));
  error->set_error_message(std::move(message));
}

// The file first, then every file it imports, each once: a client can build
// a pool from one answer without asking again.
void AddFileWithDependencies(const FileDescriptor* file, std::unordered_set<std::string_view>* sent,
                             reflection::FileDescriptorResponse* out) {
  if (!sent->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(out->add_file_descriptor_proto());
  for (int i = 0; i < file->dependency_count(); ++i) {
    AddFileWithDependencies(file->dependency(i), sent, out);
  }
}

void SetFile(const FileDescriptor* file, reflection::ServerReflectionResponse* response) {
  std::unordered_set<std::string_view> sent;
  AddFileWithDependencies(file, &sent, response->mutable_file_descriptor_response());
}

}  // namespace

// One stream: read a request, write its answer, read the next; the client
// closing its side ends the call with OK.
class ReflectionV1Service::Reactor final
    : public grpc::ServerBidiReactor<reflection::ServerReflectionRequest,
                                     reflection::ServerReflectionResponse> {
 public:
  explicit Reactor(const ReflectionV1Service* service) : service_(service) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client half-closed (or the call is gone): nothing left to answer.
      Finish(grpc::Status::OK);
      return;
    }
    response_ = service_->Answer(request_);
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  const ReflectionV1Service* service_;
  reflection::ServerReflectionRequest request_;
  reflection::ServerReflectionResponse response_;
};

ReflectionV1Service::ReflectionV1Service(const google::protobuf::DescriptorPool* pool)
    : pool_(pool) {}

void ReflectionV1Service::SetServiceList(const std::vector<std::string>* services) {
  services_.store(services, std::memory_order_release);
}

reflection::ServerReflectionResponse ReflectionV1Service::Answer(
    const reflection::ServerReflectionRequest& request) const {
  reflection::ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  switch (request.message_request_case()) {
    case reflection::ServerReflectionRequest::kFileByFilename: {
      const FileDescriptor* file = pool_->FindFileByName(request.file_by_filename());
      if (file == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("file \"", request.file_by_filename(), "\" is not known"), &response);
      } else {
        SetFile(file, &response);
      }
      break;
    }
    case reflection::ServerReflectionRequest::kFileContainingSymbol: {
      const FileDescriptor* file =
          pool_->FindFileContainingSymbol(request.file_containing_symbol());
      if (file == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("symbol \"", request.file_containing_symbol(), "\" is not known"),
                 &response);
      } else {
        SetFile(file, &response);
      }
      break;
    }
    case reflection::ServerReflectionRequest::kFileContainingExtension: {
      const reflection::ExtensionRequest& wanted = request.file_containing_extension();
      const google::protobuf::Descriptor* type =
          pool_->FindMessageTypeByName(wanted.containing_type());
      const google::protobuf::FieldDescriptor* extension =
          type == nullptr ? nullptr : pool_->FindExtensionByNumber(type, wanted.extension_number());
      if (type == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("message type \"", wanted.containing_type(), "\" is not known"),
                 &response);
      } else if (extension == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("\"", wanted.containing_type(), "\" has no known extension ",
                              wanted.extension_number()),
                 &response);
      } else {
        SetFile(extension->file(), &response);
      }
      break;
    }
    case reflection::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const google::protobuf::Descriptor* type =
          pool_->FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("message type \"", request.all_extension_numbers_of_type(),
                              "\" is not known"),
                 &response);
        break;
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool_->FindAllExtensions(type, &extensions);
      reflection::ExtensionNumberResponse* numbers =
          response.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const google::protobuf::FieldDescriptor* extension : extensions) {
        numbers->add_extension_number(extension->number());
      }
      break;
    }
    case reflection::ServerReflectionRequest::kListServices: {
      const std::vector<std::string>* services = services_.load(std::memory_order_acquire);
      if (services == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND, "the server has not finished starting", &response);
        break;
      }
      reflection::ListServiceResponse* list = response.mutable_list_services_response();
      for (const std::string& name : *services) list->add_service()->set_name(name);
      break;
    }
    case reflection::ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      // Also what a request kind newer than this protocol decodes to.
      SetError(grpc::StatusCode::UNIMPLEMENTED, "the request asks for nothing this server knows",
               &response);
      break;
  }
  return response;
}

std::vector<std::string> ReflectionV1Service::UndescribedServices() const {
  std::vector<std::string> missing;
  const std::vector<std::string>* services = services_.load(std::memory_order_acquire);
  if (services == nullptr) return missing;
  for (const std::string& name : *services) {
    if (pool_->FindServiceByName(name) == nullptr) missing.push_back(name);
  }
  return missing;
}

grpc::ServerBidiReactor<reflection::ServerReflectionRequest, reflection::ServerReflectionResponse>*
ReflectionV1Service::ServerReflectionInfo(grpc::CallbackServerContext* /*context*/) {
  return new Reactor(this);
}

namespace {

// Registers the service when the server is created and gives it the
// server's service list at the end of BuildAndStart (gRPC registers its
// Health service inside Start(), after the plugins' InitServer).
class ReflectionV1Plugin final : public grpc::ServerBuilderPlugin {
 public:
  std::string name() override { return "weightpath_reflection_v1"; }

  void InitServer(grpc::ServerInitializer* initializer) override {
    if (!initializer->RegisterService(service_)) {
      spdlog::error("grpc.reflection.v1 could not be registered; reflection v1 is off");
    }
  }

  void Finish(grpc::ServerInitializer* initializer) override {
    service_->SetServiceList(initializer->GetServiceList());
    for (const std::string& name : service_->UndescribedServices()) {
      spdlog::warn("reflection lists {} but cannot describe it: its .proto file is not linked in",
                   name);
    }
  }

  void ChangeArguments(const std::string& /*name*/, void* /*value*/) override {}

 private:
  std::shared_ptr<ReflectionV1Service> service_ = std::make_shared<ReflectionV1Service>();
};

class ReflectionV1Option final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ReflectionV1Plugin>());
  }
};

}  // namespace

std::unique_ptr<grpc::ServerBuilderOption> ReflectionV1ServerOption() {
  return std::make_unique<ReflectionV1Option>();
}

}  // namespace weightpath::server
