// The floor for ResolveWeightPath: a gRPC server built like weightpath-server
// (callback API, raw ResolveWeightPath, default health service, the same
// message size limit and encodings, abseil's Mutex deadlock detection off)
// whose handler answers every call with the same response bytes the real server sends for
// PROFILE, without reading the request. Driven with the real request body,
// it measures what gRPC and the kernel cost for messages of these sizes, so
// bench/server_load.sh can tell that cost apart from what weightpath adds.
//
// Usage: bench_grpc_floor_server PROFILE.json [HOST:PORT] [--unchanged]   (port 0: any)
// --unchanged: answers with the "unchanged" response the server gives a
// device that already holds the decision (policy version, interval, etag).
// Prints "listening grpc=HOST:PORT" once serving; stops on SIGTERM/SIGINT.
#include <pthread.h>
#include <signal.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "bench/bench_request.h"
#include "common/deterministic_bytes.h"
#include "server/config_watcher.h"
#include "server/server.h"
#include "server/resolve/resolver.h"
#include "weightpath/v1/weightpath.grpc.pb.h"

namespace {

class FloorService final
    : public weightpath::v1::WeightPath::WithRawCallbackMethod_ResolveWeightPath<
          weightpath::v1::WeightPath::CallbackService> {
 public:
  explicit FloorService(const std::string& response) {
    const grpc::Slice slice(response);
    response_ = grpc::ByteBuffer(&slice, 1);
  }

  grpc::ServerUnaryReactor* ResolveWeightPath(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* /*request*/,
                                              grpc::ByteBuffer* response) override {
    *response = response_;  // shares the slice
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  grpc::ByteBuffer response_;
};

}  // namespace

int main(int argc, char** argv) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before gRPC starts its threads
  // As weightpath-server does (server/main.cc): Debian's abseil keeps Mutex
  // deadlock detection on, and gRPC's own locks are absl::Mutex, so with it
  // on every call of the floor walked the lock graph (about 2.5k
  // instructions a call that the server does not pay: the floor was not
  // the floor).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const bool unchanged = argc >= 3 && std::string(argv[argc - 1]) == "--unchanged";
  const int positional = argc - (unchanged ? 1 : 0);
  if (positional < 2 || positional > 3) {
    std::fprintf(stderr, "usage: %s PROFILE.json [HOST:PORT] [--unchanged]\n", argv[0]);
    return 2;
  }
  const weightpath::v1::ResolveWeightPathRequest request =
      weightpath::bench::BenchResolveRequestOrExit(argv[1]);
  absl::StatusOr<weightpath::v1::ResolveWeightPathResponse> response =
      weightpath::bench::EmbeddedDefaultsDecision(request);
  if (!response.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[1], response.status().ToString().c_str());
    return 1;
  }
  if (unchanged) {
    weightpath::v1::ResolveWeightPathResponse answer;
    answer.set_policy_version(response->policy_version());
    answer.set_resolve_interval_seconds(response->resolve_interval_seconds());
    answer.set_decision_etag(response->decision_etag());
    answer.set_unchanged(true);
    *response = answer;
  }

  FloorService service(weightpath::DeterministicBytes(*response));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  const std::string listen = positional == 3 ? argv[2] : "127.0.0.1:0";
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  // The server's limits and encodings (server/server.cc), so the headers
  // are the same bytes (grpc-accept-encoding) and the filters the same work.
  // The server registers no interceptor (with one, gRPC does per-call work
  // for it on every method), and neither does the floor.
  builder.SetMaxReceiveMessageSize(weightpath::server::kMaxReceiveMessageBytes);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "%s: cannot listen\n", listen.c_str());
    return 1;
  }
  server->GetHealthCheckService()->SetServingStatus("", true);
  std::printf("listening grpc=%s:%d\n", listen.substr(0, listen.rfind(':')).c_str(), port);
  std::fflush(stdout);

  // Waited for with sigwait on signals blocked since the start, in every
  // thread: a pause() loop missed a SIGTERM that landed between its check
  // and the pause (under callgrind, often), and never stopped.
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server->Shutdown();
  return 0;
}
