// The probe's steps, each filling its part of the profile and adding a
// probe note for whatever it could not read. Internal to the probe library.
#pragma once

#include "absl/status/statusor.h"
#include "agent/probe/probe.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::probe {

// arch, cpu_model, cpu_flags (AMX confirmed or dropped), n_logical,
// n_physical, clusters, and the CPU's supports_bf16/supports_fp16.
void ProbeCpu(const ProbeEnvironment& environment, v1::HardwareProfile* profile);

// ram_total_bytes, ram_available_bytes.
void ProbeMemory(const Filesystem& filesystem, v1::HardwareProfile* profile);

// numa_nodes, thermal_zones, host_os.
void ProbeSystem(const Filesystem& filesystem, v1::HardwareProfile* profile);

// Lowers n_logical / n_physical and the RAM figures to what this process
// may use (affinity, cgroup v2 or v1), with a note for each limit applied.
// Runs after ProbeCpu and ProbeMemory.
void ApplyResourceLimits(const ProbeEnvironment& environment, v1::HardwareProfile* profile);

// accelerator, gpu_*, accelerators; a GPU's precision support replaces the
// CPU's. Runs last: a unified-memory GPU's memory is the RAM figure.
void ProbeAccelerators(const ProbeEnvironment& environment, v1::HardwareProfile* profile);

// The profile in a file named by `variable`, source "file:<path>".
absl::StatusOr<v1::HardwareProfile> LoadProfileFile(const std::string& variable,
                                                    const std::string& path);

}  // namespace weightpath::probe
