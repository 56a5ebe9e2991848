// The real device behind `weightpath-agent boot` and `run`: the wall clock,
// randomness seeded from the OS (so devices rebooting together draw
// different waits), the hardware probe under --root, and this binary's
// version. Part of the binary, not the library: tests inject their own.
#pragma once

#include <memory>
#include <string>

#include "agent/flow/boot_flow.h"
#include "common/clock.h"
#include "agent/probe/filesystem.h"
#include "agent/base/random_source.h"

namespace weightpath::agent {

class LiveDevice {
 public:
  // `state_dir` keeps the probe's GPU inventory between boots (a probe of
  // "/" only).
  LiveDevice(const std::string& root, const std::string& state_dir);
  LiveDevice(const LiveDevice&) = delete;
  LiveDevice& operator=(const LiveDevice&) = delete;

  // Sets clock, random, probe and agent_version; `dependencies` must not be
  // used after this object is gone.
  void Bind(BootDependencies& dependencies);

 private:
  SystemClock clock_;
  SeededRandomSource random_;
  std::unique_ptr<probe::Filesystem> filesystem_;
  std::string state_dir_;
};

}  // namespace weightpath::agent
