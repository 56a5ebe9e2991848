// Writes gRPC-framed request bodies for h2load (bench/server_load.sh): one
// byte "not compressed", four bytes big-endian length, the serialized
// message.
// Usage: bench_server_request_body PROFILE.json RESOLVE.bin HEALTH.bin [--known-etag]
// --known-etag: the request carries the decision_etag of the embedded
// defaults' decision for it, as a device re-resolving what it holds does, so
// the server answers "unchanged".
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "grpc/health/v1/health.pb.h"
#include "bench/bench_request.h"
#include "weightpath/v1/weightpath.pb.h"

namespace {

bool WriteFramed(const std::string& path, const google::protobuf::MessageLite& message) {
  const std::string payload = message.SerializeAsString();
  const uint32_t size = static_cast<uint32_t>(payload.size());
  std::string framed;
  framed.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8) framed.push_back(static_cast<char>(size >> shift));
  framed += payload;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << framed;
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  const bool known_etag = argc == 5 && std::string(argv[4]) == "--known-etag";
  if (argc != 4 && !known_etag) {
    std::fprintf(stderr, "usage: %s PROFILE.json RESOLVE.bin HEALTH.bin [--known-etag]\n", argv[0]);
    return 2;
  }
  weightpath::v1::ResolveWeightPathRequest request =
      weightpath::bench::BenchResolveRequestOrExit(argv[1]);
  if (known_etag) {
    const absl::StatusOr<weightpath::v1::ResolveWeightPathResponse> decision =
        weightpath::bench::EmbeddedDefaultsDecision(request);
    if (!decision.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[1], decision.status().ToString().c_str());
      return 1;
    }
    request.set_known_decision_etag(decision->decision_etag());
  }
  grpc::health::v1::HealthCheckRequest health;  // "" = the whole server
  if (!WriteFramed(argv[2], request) || !WriteFramed(argv[3], health)) {
    std::fprintf(stderr, "cannot write the bodies\n");
    return 1;
  }
  std::printf("resolve request: %zu bytes serialized\n", request.ByteSizeLong());
  return 0;
}
