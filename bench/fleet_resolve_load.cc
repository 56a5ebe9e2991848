// bench_fleet_resolve: a closed-loop gRPC load generator for
// ResolveWeightPath. It alternates rounds between two servers (A = registry
// on, B = registry off: A B A B ...) so drift of a shared, noisy machine
// hits both sides alike, and prints each round's QPS and the on/off ratio
// of the summed rounds.
//
// Device ids are dev-00000000 .. dev-<devices-1>, drawn at random. With
// --register it instead resolves each id once against --on (the registry a
// fleet leaves after every device has booted once), so the timed rounds
// re-resolve registered devices: the steady state of a fleet.
#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "weightpath/v1/weightpath.grpc.pb.h"

ABSL_FLAG(std::string, on, "", "HOST:PORT of the server with the registry on");
ABSL_FLAG(std::string, off, "", "HOST:PORT of the server started with --store=none");
ABSL_FLAG(int, rounds, 3, "rounds per server (A B alternating)");
ABSL_FLAG(absl::Duration, round_time, absl::Seconds(5), "length of one round");
ABSL_FLAG(int, concurrency, 8, "client threads, one call in flight each");
ABSL_FLAG(int64_t, devices, 1000000, "device ids are drawn from dev-00000000 .. devices-1");
ABSL_FLAG(bool, register, false,
          "resolve every device id once against --on, then exit (builds the registry)");

namespace {

using weightpath::v1::ResolveWeightPathRequest;
using weightpath::v1::ResolveWeightPathResponse;
using weightpath::v1::WeightPath;

ResolveWeightPathRequest Request(int64_t device) {
  ResolveWeightPathRequest request;
  request.set_device_id(absl::StrFormat("dev-%08d", device));
  auto* profile = request.mutable_profile();
  profile->set_arch("x86_64");
  const bool amx = device % 3 == 0;
  profile->set_cpu_model(amx ? "Intel(R) Xeon(R) Platinum 8480C"
                             : "Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz");
  for (const char* flag : {"avx2", "avx512f", "avx512_bf16"}) profile->add_cpu_flags(flag);
  if (amx) {
    for (const char* flag : {"amx_tile", "amx_bf16", "amx_int8"}) profile->add_cpu_flags(flag);
  }
  profile->set_n_logical(24);
  profile->set_accelerator("none");
  (*request.mutable_labels())["site"] = absl::StrCat("site-", device % 97);
  request.set_agent_version("0.1.0");
  return request;
}

std::vector<std::unique_ptr<WeightPath::Stub>> Stubs(const std::string& address, int count) {
  std::vector<std::unique_ptr<WeightPath::Stub>> stubs;
  grpc::ChannelArguments arguments;
  for (int i = 0; i < count; ++i) {
    // A channel per thread: one HTTP/2 connection would serialise the load.
    arguments.SetInt("weightpath.bench.channel", i);
    stubs.push_back(WeightPath::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments)));
  }
  return stubs;
}

struct RoundResult {
  uint64_t ok = 0;
  uint64_t failed = 0;
  double seconds = 0;
};

RoundResult RunRound(const std::string& address, int concurrency, absl::Duration length,
                     int64_t devices, uint64_t seed) {
  std::vector<std::unique_ptr<WeightPath::Stub>> stubs = Stubs(address, concurrency);
  // Warm the connections outside the timed window.
  for (auto& stub : stubs) {
    grpc::ClientContext context;
    ResolveWeightPathResponse response;
    (void)stub->ResolveWeightPath(&context, Request(0), &response);
  }
  std::atomic<uint64_t> ok{0};
  std::atomic<uint64_t> failed{0};
  const absl::Time start = absl::Now();
  const absl::Time end = start + length;
  std::vector<std::thread> threads;
  for (int i = 0; i < concurrency; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 random(seed * 1000 + static_cast<uint64_t>(i));
      std::uniform_int_distribution<int64_t> pick(0, devices - 1);
      while (absl::Now() < end) {
        grpc::ClientContext context;
        context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
        ResolveWeightPathResponse response;
        const grpc::Status status = stubs[static_cast<size_t>(i)]->ResolveWeightPath(
            &context, Request(pick(random)), &response);
        (status.ok() ? ok : failed).fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return {ok.load(), failed.load(), absl::ToDoubleSeconds(absl::Now() - start)};
}

// Each device id once, in order, split between the threads.
int RegisterEveryDevice(const std::string& address, int concurrency, int64_t devices) {
  std::vector<std::unique_ptr<WeightPath::Stub>> stubs = Stubs(address, concurrency);
  std::atomic<int64_t> next{0};
  std::atomic<uint64_t> failed{0};
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int i = 0; i < concurrency; ++i) {
    threads.emplace_back([&, i] {
      for (int64_t device = next++; device < devices; device = next++) {
        grpc::ClientContext context;
        context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
        ResolveWeightPathResponse response;
        if (!stubs[static_cast<size_t>(i)]->ResolveWeightPath(&context, Request(device), &response).ok()) {
          failed.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("registered %lld devices in %.1f s (%.0f resolves/s), %llu failed\n",
              static_cast<long long>(devices), seconds, static_cast<double>(devices) / seconds,
              static_cast<unsigned long long>(failed.load()));
  return failed.load() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string on = absl::GetFlag(FLAGS_on);
  const std::string off = absl::GetFlag(FLAGS_off);
  if (absl::GetFlag(FLAGS_register)) {
    if (on.empty()) {
      std::fprintf(stderr, "bench_fleet_resolve: --register needs --on\n");
      return 2;
    }
    return RegisterEveryDevice(on, absl::GetFlag(FLAGS_concurrency), absl::GetFlag(FLAGS_devices));
  }
  if (on.empty() || off.empty()) {
    std::fprintf(stderr, "bench_fleet_resolve: --on and --off are required\n");
    return 2;
  }
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  const absl::Duration length = absl::GetFlag(FLAGS_round_time);
  const int64_t devices = absl::GetFlag(FLAGS_devices);
  double total_on = 0, total_off = 0, seconds_on = 0, seconds_off = 0;
  std::printf("round  server        ok       failed  seconds  qps\n");
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    for (const bool registry : {true, false}) {
      const RoundResult result = RunRound(registry ? on : off, concurrency, length, devices,
                                          static_cast<uint64_t>(round * 2 + (registry ? 0 : 1)));
      std::printf("%5d  %-12s  %8llu  %6llu  %7.2f  %.0f\n", round,
                  registry ? "registry-on" : "registry-off",
                  static_cast<unsigned long long>(result.ok),
                  static_cast<unsigned long long>(result.failed), result.seconds,
                  result.ok / result.seconds);
      std::fflush(stdout);
      (registry ? total_on : total_off) += static_cast<double>(result.ok);
      (registry ? seconds_on : seconds_off) += result.seconds;
    }
  }
  const double qps_on = total_on / seconds_on;
  const double qps_off = total_off / seconds_off;
  std::printf("registry-on %.0f qps, registry-off %.0f qps, ratio on/off %.3f\n", qps_on, qps_off,
              qps_on / qps_off);
  return 0;
}
