#include "agent/net/weightpath_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"
#include "weightpath/v1/weightpath.grpc.pb.h"

namespace weightpath::agent {
namespace {

using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using testing::TempDir;
using testing::WriteTextFile;
using ::weightpath::testing::StatusIs;

// A WeightPath service on 127.0.0.1 that answers every call and records
// which connection (the client's address and port) each one came over.
class RecordingService final : public v1::WeightPath::Service {
 public:
  grpc::Status ResolveWeightPath(grpc::ServerContext* context,
                                 const v1::ResolveWeightPathRequest* request,
                                 v1::ResolveWeightPathResponse* response) override {
    Record(context);
    {
      absl::MutexLock lock(&mutex_);
      last_resolve_ = *request;
    }
    response->set_model(request->model());
    return grpc::Status::OK;
  }
  grpc::Status ReportMeasurement(grpc::ServerContext* context,
                                 const v1::ReportMeasurementRequest* request,
                                 v1::ReportMeasurementResponse* response) override {
    Record(context);
    if (request->model().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "model is required");
    }
    response->set_measurement_id("m-1");
    return grpc::Status::OK;
  }
  grpc::Status ReportOutcome(grpc::ServerContext* context, const v1::ReportOutcomeRequest* request,
                             v1::ReportOutcomeResponse* response) override {
    Record(context);
    {
      absl::MutexLock lock(&mutex_);
      last_outcome_ = *request;
    }
    response->set_duplicate(true);
    return grpc::Status::OK;
  }

  std::vector<std::string> peers() {
    absl::MutexLock lock(&mutex_);
    return peers_;
  }
  v1::ReportOutcomeRequest last_outcome() {
    absl::MutexLock lock(&mutex_);
    return last_outcome_;
  }
  v1::ResolveWeightPathRequest last_resolve() {
    absl::MutexLock lock(&mutex_);
    return last_resolve_;
  }

 private:
  void Record(grpc::ServerContext* context) {
    absl::MutexLock lock(&mutex_);
    peers_.push_back(context->peer());
  }
  absl::Mutex mutex_;
  std::vector<std::string> peers_;
  v1::ReportOutcomeRequest last_outcome_;
  v1::ResolveWeightPathRequest last_resolve_;
};

class AgentWeightPathClient : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  RecordingService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// Resolve, measurement and outcome calls share the client's one channel:
// the server sees all of them come over the same connection.
TEST_F(AgentWeightPathClient, EveryCallGoesOverOneChannel) {
  absl::StatusOr<std::unique_ptr<WeightPathClient>> client =
      WeightPathClient::Create(address(), std::nullopt);
  ASSERT_TRUE(client.ok()) << client.status();

  v1::ResolveWeightPathRequest resolve;
  resolve.set_model("qwen3-8b");
  absl::StatusOr<v1::ResolveWeightPathResponse> resolved =
      (*client)->Resolve(resolve, absl::Seconds(5));
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->model(), "qwen3-8b");

  v1::ReportMeasurementRequest measurement;
  measurement.set_model("qwen3-8b");
  absl::StatusOr<v1::ReportMeasurementResponse> measured =
      (*client)->ReportMeasurement(measurement, absl::Seconds(5));
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->measurement_id(), "m-1");

  absl::StatusOr<v1::ReportOutcomeResponse> reported =
      (*client)->ReportOutcome(v1::ReportOutcomeRequest(), absl::Seconds(5));
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_TRUE(reported->duplicate());

  const std::vector<std::string> peers = service_.peers();
  ASSERT_THAT(peers, SizeIs(3));
  EXPECT_THAT(peers, Each(peers.front()));
}

// A readiness endpoint answering "HTTP/1.1 2\xff\xfe OK" got its bytes into
// an ENGINE_START_FAILED detail; a proto3 string that is not UTF-8 makes the
// whole request unparseable to the server (INTERNAL), and the report was
// lost. Every request is escaped on its way out: well-formed UTF-8 stays,
// each stray byte becomes \xNN.
TEST_F(AgentWeightPathClient, StringsThatAreNotUtf8AreEscapedOnTheirWayOut) {
  const std::string hostile = "last answer HTTP/1.1 2\xff\xfe OK, caf\xc3\xa9 \xc0\xaf \xed\xa0\x80";
  v1::ReportOutcomeRequest report;
  report.set_outcome(v1::OUTCOME_ENGINE_START_FAILED);
  report.set_detail(hostile);
  report.set_path("w4a8-\xff");

  // What the server makes of the raw bytes: the request does not parse.
  {
    auto stub = v1::WeightPath::NewStub(
        grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ReportOutcomeResponse response;
    EXPECT_EQ(stub->ReportOutcome(&context, report, &response).error_code(),
              grpc::StatusCode::INTERNAL);
  }

  absl::StatusOr<std::unique_ptr<WeightPathClient>> client =
      WeightPathClient::Create(address(), std::nullopt);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->ReportOutcome(report, absl::Seconds(5)).ok());
  const std::string escaped =
      "last answer HTTP/1.1 2\\xff\\xfe OK, caf\xc3\xa9 \\xc0\\xaf \\xed\\xa0\\x80";
  EXPECT_EQ(service_.last_outcome().detail(), escaped);
  EXPECT_EQ(service_.last_outcome().path(), "w4a8-\\xff");
  EXPECT_EQ(report.detail(), hostile) << "the caller's request is not changed";

  // Nested messages and maps too: a label from the config, a DMI string in
  // the profile.
  v1::ResolveWeightPathRequest resolve;
  resolve.set_model("qwen3-8b");
  (*resolve.mutable_labels())["site"] = "m\xfcnchen";
  resolve.mutable_profile()->set_cpu_model("Xeon\x80\x81");
  resolve.mutable_profile()->add_cpu_flags("avx2");
  resolve.mutable_profile()->add_cpu_flags("amx\xff");
  ASSERT_TRUE((*client)->Resolve(resolve, absl::Seconds(5)).ok());
  const v1::ResolveWeightPathRequest seen = service_.last_resolve();
  EXPECT_EQ(seen.labels().at("site"), "m\\xfcnchen");
  EXPECT_EQ(seen.profile().cpu_model(), "Xeon\\x80\\x81");
  EXPECT_THAT(seen.profile().cpu_flags(), ::testing::ElementsAre("avx2", "amx\\xff"));
  EXPECT_EQ(seen.model(), "qwen3-8b");

  v1::ReportOutcomeRequest clean;
  clean.set_detail("caf\xc3\xa9, \xe2\x9c\x93");
  EXPECT_FALSE(EscapeOutgoingStrings(&clean));
  EXPECT_EQ(clean.detail(), "caf\xc3\xa9, \xe2\x9c\x93");
}

// A refusal keeps its code, and the message names the method it came from.
TEST_F(AgentWeightPathClient, ARefusalKeepsItsCodeAndNamesTheMethod) {
  absl::StatusOr<std::unique_ptr<WeightPathClient>> client =
      WeightPathClient::Create(address(), std::nullopt);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_THAT((*client)->ReportMeasurement(v1::ReportMeasurementRequest(), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ReportMeasurement: model is required")));
}

TEST(AgentWeightPathClientNoServer, AnUnreachableServerIsUnavailableForEveryCall) {
  // A port that was just free: nothing listens there.
  int port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port = ntohs(address.sin_port);
    ::close(fd);
  }
  absl::StatusOr<std::unique_ptr<WeightPathClient>> client =
      WeightPathClient::Create("127.0.0.1:" + std::to_string(port), std::nullopt);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_THAT((*client)->Resolve(v1::ResolveWeightPathRequest(), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("ResolveWeightPath: ")));
  EXPECT_THAT((*client)->ReportMeasurement(v1::ReportMeasurementRequest(), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("ReportMeasurement: ")));
  EXPECT_THAT((*client)->ReportOutcome(v1::ReportOutcomeRequest(), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("ReportOutcome: ")));
}

TEST(AgentWeightPathClientTls, AnUnreadableOrEmptyPemFileIsNamed) {
  TempDir dir;
  EXPECT_THAT(WeightPathClient::Create("127.0.0.1:1", TlsFiles{dir.Sub("missing-ca.pem"), "", ""}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("tls.ca")));
  WriteTextFile(dir.Sub("empty.pem"), "");
  EXPECT_THAT(WeightPathClient::Create(
                  "127.0.0.1:1", TlsFiles{"", dir.Sub("empty.pem"), dir.Sub("empty.pem")}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("tls.cert")));
}

TEST(AgentWeightPathClientRetry, EveryCallRetriesWithTheConfigsTimeoutAndBackoff) {
  AgentConfig config;
  config.call_timeout = absl::Seconds(3);
  config.retry_base_delay = absl::Milliseconds(40);
  config.retry_max_delay = absl::Seconds(2);
  const RetryOptions options = ServerRetryOptions(config);
  EXPECT_EQ(options.call_timeout, absl::Seconds(3));
  EXPECT_EQ(options.base_delay, absl::Milliseconds(40));
  EXPECT_EQ(options.max_delay, absl::Seconds(2));
}

}  // namespace
}  // namespace weightpath::agent
