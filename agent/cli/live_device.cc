#include "agent/cli/live_device.h"

#include <random>

#include "agent/probe/probe.h"

#ifndef WEIGHTPATH_AGENT_VERSION
#define WEIGHTPATH_AGENT_VERSION "unknown"
#endif

namespace weightpath::agent {

LiveDevice::LiveDevice(const std::string& root, const std::string& state_dir)
    : random_(std::random_device{}()),
      filesystem_(probe::MakeRootedFilesystem(root)),
      state_dir_(state_dir) {}

void LiveDevice::Bind(BootDependencies& dependencies) {
  dependencies.clock = &clock_;
  dependencies.random = &random_;
  dependencies.agent_version = WEIGHTPATH_AGENT_VERSION;
  dependencies.probe = [this]() {
    return probe::ProbeHardware(probe::LiveProbeEnvironment(*filesystem_, state_dir_));
  };
}

}  // namespace weightpath::agent
