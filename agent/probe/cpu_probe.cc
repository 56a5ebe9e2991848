#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/probe/cpu_flags.h"
#include "agent/probe/cpu_model_name.h"
#include "agent/probe/cpu_topology.h"
#include "agent/probe/cpuinfo.h"
#include "agent/probe/probe_steps.h"
#include "agent/probe/sysfs_text.h"

namespace weightpath::probe {
namespace {

void AddNote(v1::HardwareProfile* profile, std::string note) {
  profile->add_probe_notes(std::move(note));
}

// CPU numbers to look up in sysfs: the online ones cpuinfo listed, or every
// cpuN directory when cpuinfo could not be read.
std::vector<uint32_t> CpuNumbers(const Filesystem& filesystem, const std::optional<CpuInfo>& cpuinfo) {
  std::vector<uint32_t> numbers;
  if (cpuinfo) {
    for (const CpuInfoProcessor& processor : cpuinfo->processors) numbers.push_back(processor.index);
    return numbers;
  }
  auto names = filesystem.ListDirectory("/sys/devices/system/cpu");
  if (!names.ok()) return numbers;
  for (const std::string& name : *names) {
    uint32_t number = 0;
    if (IsNumberedEntry(name, "cpu") && absl::SimpleAtoi(name.substr(3), &number)) {
      numbers.push_back(number);
    }
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

void ConfirmAmx(const ProbeEnvironment& environment, v1::HardwareProfile* profile) {
  std::vector<std::string> flags(profile->cpu_flags().begin(), profile->cpu_flags().end());
  const bool has_amx = std::any_of(flags.begin(), flags.end(), [](const std::string& flag) {
    return flag.rfind("amx_", 0) == 0;
  });
  if (profile->arch() != "x86_64" || !has_amx) return;
  if (!environment.request_amx_permission) {
    AddNote(profile,
            "amx: cpuinfo flags kept but not confirmed; the kernel's AMX permission is only "
            "asked on a live probe");
    return;
  }
  const AmxPermission permission = environment.request_amx_permission();
  if (permission.answer == AmxPermission::Answer::kGranted) return;
  DropAmxFlags(&flags);
  profile->clear_cpu_flags();
  for (std::string& flag : flags) profile->add_cpu_flags(std::move(flag));
  AddNote(profile, absl::StrCat("amx: cpuinfo lists AMX but the kernel refused the tile state "
                                "(arch_prctl ARCH_REQ_XCOMP_PERM: ",
                                permission.detail, "), so amx flags were dropped"));
}

void ProbeTopology(const Filesystem& filesystem, const std::optional<CpuInfo>& cpuinfo,
                   v1::HardwareProfile* profile) {
  const std::vector<uint32_t> numbers = CpuNumbers(filesystem, cpuinfo);
  if (profile->n_logical() == 0) profile->set_n_logical(static_cast<uint32_t>(numbers.size()));

  std::vector<CoreLocation> locations;
  std::vector<CpuMaxFrequency> frequencies;
  for (uint32_t cpu : numbers) {
    const std::string dir = absl::StrCat("/sys/devices/system/cpu/cpu", cpu);
    const auto package = ReadNumber(filesystem, dir + "/topology/physical_package_id");
    const auto core = ReadNumber(filesystem, dir + "/topology/core_id");
    if (package && core) {
      locations.push_back({static_cast<uint32_t>(*package), static_cast<uint32_t>(*core)});
    }
    if (const auto max_khz = ReadNumber(filesystem, dir + "/cpufreq/cpuinfo_max_freq")) {
      frequencies.push_back({cpu, *max_khz});
    }
  }

  if (!numbers.empty() && locations.size() == numbers.size()) {
    profile->set_n_physical(CountPhysicalCores(locations));
  } else {
    // x86 cpuinfo repeats the topology per stanza ("physical id", "core id").
    std::vector<CoreLocation> from_cpuinfo;
    if (cpuinfo) {
      for (const CpuInfoProcessor& processor : cpuinfo->processors) {
        if (processor.physical_id && processor.core_id) {
          from_cpuinfo.push_back({*processor.physical_id, *processor.core_id});
        }
      }
    }
    if (cpuinfo && !from_cpuinfo.empty() && from_cpuinfo.size() == cpuinfo->processors.size()) {
      profile->set_n_physical(CountPhysicalCores(from_cpuinfo));
    } else {
      profile->set_n_physical(profile->n_logical());
      AddNote(profile, "n_physical: no readable /sys/devices/system/cpu/cpu*/topology; counted "
                       "one core per logical CPU");
    }
  }

  if (frequencies.empty()) {
    AddNote(profile, "clusters: no readable cpufreq/cpuinfo_max_freq");
    return;
  }
  if (frequencies.size() != numbers.size()) {
    AddNote(profile, absl::StrCat("clusters: cpuinfo_max_freq readable for ", frequencies.size(),
                                  " of ", numbers.size(), " CPUs"));
  }
  for (v1::CpuCluster& cluster : GroupClustersByMaxFrequency(std::move(frequencies))) {
    *profile->add_clusters() = std::move(cluster);
  }
}

}  // namespace

void ProbeCpu(const ProbeEnvironment& environment, v1::HardwareProfile* profile) {
  const Filesystem& filesystem = *environment.filesystem;
  std::optional<CpuInfo> cpuinfo;
  if (auto text = filesystem.ReadFile("/proc/cpuinfo"); !text.ok()) {
    AddNote(profile, absl::StrCat("cpu: ", text.status().message()));
  } else if (auto parsed = ParseCpuInfo(*text); !parsed.ok()) {
    AddNote(profile, absl::StrCat("cpu: ", parsed.status().message()));
  } else {
    cpuinfo = std::move(*parsed);
  }

  if (environment.kernel_arch) {
    profile->set_arch(*environment.kernel_arch);
  } else if (cpuinfo && !cpuinfo->arch_hint.empty()) {
    profile->set_arch(cpuinfo->arch_hint);
  } else {
    AddNote(profile, "arch: neither uname nor /proc/cpuinfo says which CPU architecture this is");
  }

  if (cpuinfo) {
    const std::string device_tree_model =
        ReadTrimmed(filesystem, "/proc/device-tree/model").value_or("");
    profile->set_cpu_model(CpuModelName(*cpuinfo, device_tree_model));
    for (std::string& flag : NormaliseCpuFlags(CommonRawFlags(*cpuinfo), cpuinfo->flags_are_arm)) {
      profile->add_cpu_flags(std::move(flag));
    }
    profile->set_n_logical(static_cast<uint32_t>(cpuinfo->processors.size()));
  }
  ConfirmAmx(environment, profile);
  ProbeTopology(filesystem, cpuinfo, profile);

  const std::vector<std::string> flags(profile->cpu_flags().begin(), profile->cpu_flags().end());
  profile->set_supports_bf16(CpuFlagsSupportBf16(flags));
  profile->set_supports_fp16(CpuFlagsSupportFp16(flags));
}

}  // namespace weightpath::probe
