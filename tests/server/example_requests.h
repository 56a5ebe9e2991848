// One ResolveWeightPath request per example profile (examples/profiles), for
// suites that check the server's handling against every real device shape.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "policy/profile_json.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server::testing {

// device_id is the file's stem; the caller sets priority, labels and the rest.
inline std::vector<v1::ResolveWeightPathRequest> ExampleProfileRequests() {
  std::vector<v1::ResolveWeightPathRequest> requests;
  for (const auto& entry :
       std::filesystem::directory_iterator(WEIGHTPATH_SOURCE_DIR "/examples/profiles")) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream json;
    json << in.rdbuf();
    auto profile = policy::ParseProfileJson(json.str(), entry.path().string());
    EXPECT_TRUE(profile.ok()) << entry.path() << ": " << profile.status();
    if (!profile.ok()) continue;
    v1::ResolveWeightPathRequest request;
    request.set_device_id(entry.path().stem().string());
    *request.mutable_profile() = *std::move(profile);
    requests.push_back(std::move(request));
  }
  EXPECT_EQ(requests.size(), 8u) << "examples/profiles changed";
  return requests;
}

}  // namespace weightpath::server::testing
