// A hardware profile in the seed prober's JSON (WEIGHTPATH_HW_PROFILE files,
// weightpathctl --profile): parsed, decided with the bundled policy, printed
// the way the agent's probe prints profiles, and parsed back. What the agent
// writes must read back as the same profile.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/probe/profile_text.h"
#include "google/protobuf/util/message_differencer.h"
#include "policy/hardware_class.h"
#include "policy/policy.h"
#include "policy/profile_json.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  static const auto* const kPolicy = new std::shared_ptr<const policy::Policy>(policy::DefaultPolicy());
  const std::string_view text = fuzz::Text(data, size);
  absl::StatusOr<v1::HardwareProfile> profile = policy::ParseProfileJson(text, "fuzz-profile.json");
  if (!profile.ok()) {
    FUZZ_CHECK(fuzz::IsCleanRefusal(profile.status()), profile.status().ToString());
    return 0;
  }
  const bool classifies = policy::ClassifyHardware(*profile).ok();
  for (v1::Priority priority : {v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY}) {
    absl::StatusOr<policy::Decision> decision =
        policy::Evaluate(**kPolicy, *profile, priority, policy::Labels());
    FUZZ_CHECK(decision.ok() == classifies,
               absl::StrCat("bundled policy: ", decision.status().ToString()));
  }
  // Probe text output is for people; it must not fail on any profile.
  (void)probe::ProfileText(*profile);

  absl::StatusOr<std::string> printed = probe::ProfileJson(*profile);
  FUZZ_CHECK(printed.ok(), printed.status().ToString());
  absl::StatusOr<v1::HardwareProfile> reread = policy::ParseProfileJson(*printed, "printed.json");
  FUZZ_CHECK(reread.ok(), absl::StrCat("printed profile does not parse back: ",
                                       reread.status().ToString(), "\n", *printed));
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(*profile, *reread),
             absl::StrCat("profile changed on the way back:\n", profile->DebugString(), "\nvs\n",
                          reread->DebugString()));
  return 0;
}
