// The real binary with its profile memo against the real binary without it
// (WEIGHTPATH_PROFILE_MEMO=off): every answer the same bytes, status and
// message, on the first call (which fills the memo) and on the calls after
// (which it answers), refusals with the same code, message and field; a
// reload is never answered from the old policy; with
// the registry on every device is still recorded, and a rollout still shapes.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "policy/profile_json.h"
#include "server/config/demo_catalog.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_client.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {
namespace {

using Request = v1::ResolveWeightPathRequest;
using Response = v1::ResolveWeightPathResponse;

struct RawAnswer {
  int code = -1;
  std::string message;
  std::string details;  // grpc-status-details-bin: the field a refusal names
  std::string bytes;

  bool operator==(const RawAnswer& other) const {
    return code == other.code && message == other.message && details == other.details &&
           bytes == other.bytes;
  }
};

std::ostream& operator<<(std::ostream& out, const RawAnswer& answer) {
  return out << "code " << answer.code << " \"" << answer.message << "\", " << answer.bytes.size()
             << " bytes";
}

// One call with the request's bytes as given, the answer's as they came.
RawAnswer Call(const std::shared_ptr<grpc::Channel>& channel, const std::string& request) {
  grpc::GenericStub stub(channel);
  grpc::Slice slice(request);
  grpc::ByteBuffer sent(&slice, 1);
  grpc::ByteBuffer received;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&context, "/weightpath.v1.WeightPath/ResolveWeightPath", grpc::StubOptions(),
                 &sent, &received, [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mutex);
                   status = std::move(s);
                   done = true;
                   done_cv.notify_one();
                 });
  std::unique_lock<std::mutex> lock(mutex);
  done_cv.wait(lock, [&] { return done; });
  RawAnswer answer;
  answer.code = status.error_code();
  answer.message = status.error_message();
  answer.details = status.error_details();
  if (status.ok()) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(received.Dump(&slices).ok());
    for (const grpc::Slice& each : slices) {
      answer.bytes.append(reinterpret_cast<const char*>(each.begin()), each.size());
    }
  }
  return answer;
}

std::vector<std::pair<std::string, v1::HardwareProfile>> ExampleProfiles() {
  std::vector<std::pair<std::string, v1::HardwareProfile>> profiles;
  for (const char* name : {"amd-zen4.json", "aws-graviton3.json", "intel-sapphire-rapids.json",
                           "jetson-agx-orin.json", "raspberry-pi-5.json", "rtx-4090.json",
                           "snapdragon-8gen2.json", "tesla-t4.json"}) {
    absl::StatusOr<v1::HardwareProfile> profile = policy::ParseProfileJson(
        ReadFileOrDie(absl::StrCat(WEIGHTPATH_SOURCE_DIR, "/examples/profiles/", name)), name);
    EXPECT_TRUE(profile.ok()) << profile.status();
    if (profile.ok()) profiles.emplace_back(name, *profile);
  }
  return profiles;
}

// A server started with WEIGHTPATH_PROFILE_MEMO=off in its environment.
absl::StatusOr<std::unique_ptr<ServerProcess>> StartWithoutMemo(std::vector<std::string> args) {
  setenv("WEIGHTPATH_PROFILE_MEMO", "off", 1);
  auto server = ServerProcess::Start(std::move(args));
  unsetenv("WEIGHTPATH_PROFILE_MEMO");
  return server;
}

class ServerResolveMemoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto with = ServerProcess::Start({"--store=none"});
    ASSERT_TRUE(with.ok()) << with.status();
    with_memo_ = *std::move(with);
    auto without = StartWithoutMemo({"--store=none"});
    ASSERT_TRUE(without.ok()) << without.status();
    without_memo_ = *std::move(without);
    with_ = PlaintextChannel(with_memo_->grpc_address());
    without_ = PlaintextChannel(without_memo_->grpc_address());
  }

  // The memo server answers `request` three times (the first fills the memo
  // when it can) exactly as the server without it does.
  void ExpectSameAnswers(const std::string& request, const std::string& what) {
    const RawAnswer expected = Call(without_, request);
    for (int call = 0; call < 3; ++call) {
      EXPECT_EQ(Call(with_, request), expected) << what << ", call " << call;
    }
  }

  std::unique_ptr<ServerProcess> with_memo_;
  std::unique_ptr<ServerProcess> without_memo_;
  std::shared_ptr<grpc::Channel> with_;
  std::shared_ptr<grpc::Channel> without_;
};

TEST_F(ServerResolveMemoTest, EveryAnswerIsTheFullPathsByteForByte) {
  int compared = 0;
  for (const auto& [name, profile] : ExampleProfiles()) {
    for (const v1::Priority priority :
         {v1::PRIORITY_UNSPECIFIED, v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY}) {
      for (const bool labels : {false, true}) {
        for (const char* model : {"", "no-such-model"}) {
          Request request;
          request.set_device_id(absl::StrCat("memo-", name));
          *request.mutable_profile() = profile;
          request.set_priority(priority);
          request.set_model(model);
          request.set_agent_version("0.9.0-test");
          if (labels) {
            (*request.mutable_labels())["workload"] = "agentic";
            (*request.mutable_labels())["site"] = "lab-2";
          }
          const std::string what = absl::StrCat(name, " priority ", priority, " labels ", labels,
                                                " model '", model, "'");
          ExpectSameAnswers(request.SerializeAsString(), what);
          // The etag the device would hold, a stale one, and an unknown one.
          Response full;
          if (full.ParseFromString(Call(without_, request.SerializeAsString()).bytes) &&
              !full.decision_etag().empty()) {
            request.set_known_decision_etag(full.decision_etag());
            ExpectSameAnswers(request.SerializeAsString(), what + " known etag");
          }
          request.set_known_decision_etag(std::string(32, '0'));
          ExpectSameAnswers(request.SerializeAsString(), what + " other etag");
          compared += 3;
        }
      }
    }
  }
  EXPECT_EQ(compared, 8 * 3 * 2 * 2 * 3);
}

// Requests the memo must leave to the full path, and the few bytes that
// tell them from the plain ones: each refused or answered as without it.
TEST_F(ServerResolveMemoTest, OddAndRefusedRequestsAreAnsweredAsWithoutIt) {
  const Request good = AmxRequest("odd-device");
  ExpectSameAnswers(good.SerializeAsString(), "good");  // now in the memo

  std::vector<std::pair<std::string, std::string>> cases;
  auto add = [&](const std::string& what, const Request& request) {
    cases.emplace_back(what, request.SerializeAsString());
  };
  Request request = good;
  request.set_device_id("");
  add("empty device_id", request);
  request.set_device_id("bad id!");
  add("device_id with a space", request);
  request.set_device_id(std::string(257, 'd'));
  add("device_id too long", request);
  request = good;
  request.set_agent_version(std::string(300, 'v'));
  add("agent_version too long", request);
  request = good;
  request.set_model(std::string(300, 'm'));
  add("model too long", request);
  request = good;
  request.set_known_decision_etag("ABCDEF");
  add("etag in upper case", request);
  request.set_known_decision_etag(std::string(65, 'a'));
  add("etag too long", request);
  request = good;
  (*request.mutable_labels())[""] = "empty key";
  add("label with an empty key", request);
  request = good;
  (*request.mutable_labels())["k"] = std::string(300, 'v');
  add("label value too long", request);
  request = good;
  for (int i = 0; i < 65; ++i) (*request.mutable_labels())[absl::StrCat("k", i)] = "v";
  add("65 labels", request);
  request = good;
  request.set_priority(static_cast<v1::Priority>(7));
  add("unknown priority", request);
  request = good;
  request.clear_profile();
  add("no profile", request);
  request = good;
  request.mutable_profile()->set_arch("riscv64");
  add("unsupported arch", request);
  request = good;
  request.mutable_profile()->add_cpu_flags(std::string(300, 'f'));
  add("flag too long", request);
  request = good;
  request.mutable_profile()->set_ram_available_bytes(123456789);
  add("another free RAM figure", request);
  request.mutable_profile()->set_supports_bf16(true);
  add("bf16 on", request);
  request = good;
  request.set_device_id("caf\xc3\xa9");
  add("non-ASCII device_id", request);
  request = good;
  request.set_agent_version("v\xff");
  add("invalid UTF-8 agent_version", request);
  request = good;
  request.mutable_profile()->set_cpu_model("Xeon\xff");
  add("invalid UTF-8 cpu_model", request);

  const std::string good_bytes = good.SerializeAsString();
  cases.emplace_back("the profile sent twice", good_bytes + good_bytes.substr(good_bytes.find('\x12')));
  cases.emplace_back("an unknown field after it", good_bytes + std::string("\x40\x01", 2));
  cases.emplace_back("priority as a two-byte varint", good_bytes + std::string("\x18\x81\x00", 3));
  cases.emplace_back("device_id sent twice", good_bytes + std::string("\x0a\x03xyz", 5));
  cases.emplace_back("truncated", good_bytes.substr(0, good_bytes.size() - 3));
  cases.emplace_back("empty", "");
  // The profile's last byte changed: a different profile, same length.
  std::string flipped = good_bytes;
  flipped.back() ^= 0x01;
  cases.emplace_back("last byte flipped", flipped);

  for (const auto& [what, bytes] : cases) {
    ExpectSameAnswers(bytes, what);
    ExpectSameAnswers(good_bytes, "good after " + what);
  }
}

// The agent probes before each resolve, so free RAM differs every time:
// still the same decision, and the answers equal the full path's.
TEST_F(ServerResolveMemoTest, AReprobedProfileGetsTheSameAnswers) {
  Request request = AmxRequest("reprobing-device");
  for (uint64_t free_bytes : {uint64_t{1} << 33, uint64_t{12345}, uint64_t{1} << 40, uint64_t{7}}) {
    request.mutable_profile()->set_ram_available_bytes(free_bytes);
    ExpectSameAnswers(request.SerializeAsString(), absl::StrCat("free RAM ", free_bytes));
  }
}

std::string FlippedPolicy() {
  const std::string text(policy::DefaultPolicyYaml());
  // AMX for fidelity instead of speed: both priorities change their path.
  const std::string flipped = absl::StrReplaceAll(
      text, {{"      priority: [speed]\n    path: w4a8-amx", "      priority: [fidelity]\n    path: w4a8-amx"}});
  EXPECT_NE(flipped, text);
  return flipped;
}

// Two threads resolve one AMX profile at both priorities while the policy is
// replaced by one that swaps their paths: every answer's path is the one its
// own policy_version gives, and once a thread has seen the new version it
// never sees the old one.
TEST(ServerResolveMemoReloadTest, AReloadIsNeverAnsweredFromTheOldPolicy) {
  TempDir dir;
  const std::string policy_path = dir.File("policy.yaml");
  WriteFileOrDie(policy_path, std::string(policy::DefaultPolicyYaml()));
  auto server = ServerProcess::Start(
      {"--store=none", "--policy=" + policy_path, "--reload_interval=50ms"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = PlaintextChannel((*server)->grpc_address());
  auto stub = v1::WeightPath::NewStub(channel);

  Request speed = AmxRequest("reload-device");
  speed.set_priority(v1::PRIORITY_SPEED);
  Request fidelity = speed;
  fidelity.set_priority(v1::PRIORITY_FIDELITY);
  Response first;
  ASSERT_TRUE(CallResolve(*stub, speed, &first).ok());
  const std::string old_version = first.policy_version();
  ASSERT_EQ(first.weight_path().name(), "w4a8-amx");

  std::atomic<bool> stop{false};
  std::atomic<int> new_answers{0};
  std::vector<std::string> faults[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      auto own_stub = v1::WeightPath::NewStub(channel);
      bool seen_new = false;
      for (int call = 0; !stop; ++call) {
        const bool fast = (call + t) % 2 == 0;
        Response response;
        const grpc::Status status = CallResolve(*own_stub, fast ? speed : fidelity, &response);
        if (!status.ok()) {
          faults[t].push_back(status.error_message());
          continue;
        }
        const bool is_new = response.policy_version() != old_version;
        if (seen_new && !is_new) faults[t].push_back("the old policy after the new one");
        seen_new = seen_new || is_new;
        if (is_new) ++new_answers;
        // Old: AMX for speed; new: AMX for fidelity.
        const std::string expected = fast == !is_new ? "w4a8-amx" : "w4a16-tinygemm";
        if (response.weight_path().name() != expected) {
          faults[t].push_back(absl::StrCat(fast ? "speed" : "fidelity", " got ",
                                           response.weight_path().name(), " under ",
                                           is_new ? "the new" : "the old", " policy"));
        }
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(300));
  const std::string aside = policy_path + ".tmp";
  WriteFileOrDie(aside, FlippedPolicy());
  ASSERT_EQ(rename(aside.c_str(), policy_path.c_str()), 0);
  ASSERT_TRUE(Eventually([&] { return new_answers.load() > 200; }, absl::Seconds(30)));
  stop = true;
  for (std::thread& thread : threads) thread.join();
  for (const auto& each : faults) EXPECT_TRUE(each.empty()) << each.front();
}

// With the registry on, a device the memo answers is recorded as itself
// (its id, its agent version), unchanged or not, and a rollout created
// after the memo filled still shapes the next answer.
TEST(ServerResolveMemoFleetTest, MemoAnswersAreRecordedAndRolloutsStillShape) {
  TempDir dir;
  WriteSecretFileOrDie(dir.File("token"), std::string(kAdminToken) + "\n");
  auto server = ServerProcess::Start({"--store=sqlite:" + dir.File("fleet.db"),
                                      "--admin_token_file=" + dir.File("token"),
                                      "--fleet_refresh_interval=100ms"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = PlaintextChannel((*server)->grpc_address());
  auto device_stub = v1::WeightPath::NewStub(channel);
  auto admin_stub = v1::FleetAdmin::NewStub(channel);

  Response full;
  ASSERT_TRUE(CallResolve(*device_stub, AmxRequest("fleet-first"), &full).ok());
  for (int i = 0; i < 5; ++i) {
    Request request = AmxRequest(absl::StrCat("fleet-device-", i));
    request.set_agent_version(absl::StrCat("agent-", i));
    request.mutable_profile()->set_ram_available_bytes(1000 + static_cast<uint64_t>(i));
    if (i % 2 == 1) request.set_known_decision_etag(full.decision_etag());
    Response answer;
    ASSERT_TRUE(CallResolve(*device_stub, request, &answer).ok());
    EXPECT_EQ(answer.unchanged(), i % 2 == 1);
  }
  for (int i = 0; i < 5; ++i) {
    v1::Device device;
    EXPECT_TRUE(Eventually([&] {
      v1::GetDeviceRequest get;
      get.set_device_id(absl::StrCat("fleet-device-", i));
      auto context = AdminContext();
      return admin_stub->GetDevice(context.get(), get, &device).ok();
    })) << i;
    EXPECT_EQ(device.agent_version(), absl::StrCat("agent-", i));
    EXPECT_EQ(device.path(), "w4a8-amx");
  }

  v1::CreateRolloutRequest create;
  v1::Rollout* rollout = create.mutable_rollout();
  rollout->set_id("fidelity-now");
  rollout->mutable_selector()->set_all(true);
  rollout->mutable_action()->set_set_priority(v1::PRIORITY_FIDELITY);
  v1::RolloutStage* stage = rollout->add_stages();
  stage->set_percent(100);
  stage->set_report_timeout_seconds(3600);
  {
    v1::Rollout created;
    auto context = AdminContext();
    const grpc::Status status = admin_stub->CreateRollout(context.get(), create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  Response shaped;
  ASSERT_TRUE(Eventually([&] {
    return CallResolve(*device_stub, AmxRequest("fleet-first"), &shaped).ok() &&
           shaped.rollout().rollout_id() == "fidelity-now";
  }));
  EXPECT_EQ(shaped.weight_path().name(), "w4a16-tinygemm");
  EXPECT_EQ(shaped.effective_priority(), v1::PRIORITY_FIDELITY);
}

}  // namespace
}  // namespace weightpath::server::testing
