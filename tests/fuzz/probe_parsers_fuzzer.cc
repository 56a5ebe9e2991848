// The probe's pure parsers of kernel text: /proc/cpuinfo, /proc/meminfo,
// /proc/self/cgroup, cgroup v2 cpu.max and memory.max, cgroup v1
// cpu.cfs_quota_us + cpu.cfs_period_us, /proc/version, /etc/nv_tegra_release,
// CUDA_VISIBLE_DEVICES (against a DGX-like list of GPUs and MIG slices) and
// the GPU inventory cache file (behind its header, and raw). Each gets the
// whole input (the quota pair gets its two first lines), so one corpus
// serves all of them. A container runtime, a kernel module or a captured
// tree writes these files; none of them may crash the agent or make it
// size a build for a machine that does not exist (0 CPUs, a RAM size that
// wrapped around).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/probe/arm_core_names.h"
#include "agent/probe/cgroup_limits.h"
#include "agent/probe/cpu_flags.h"
#include "agent/probe/cpu_model_name.h"
#include "agent/probe/cpuinfo.h"
#include "agent/probe/gpu_inventory.h"
#include "agent/probe/gpu_visibility.h"
#include "agent/probe/host_os.h"
#include "agent/probe/meminfo.h"
#include "agent/probe/tegra.h"
#include "tests/fuzz/fuzz_support.h"

namespace weightpath::fuzz {
namespace {

void CheckCpuInfo(absl::string_view text) {
  absl::StatusOr<probe::CpuInfo> cpuinfo = probe::ParseCpuInfo(text);
  if (!cpuinfo.ok()) {
    FUZZ_CHECK(IsCleanRefusal(cpuinfo.status()), cpuinfo.status().ToString());
    return;
  }
  FUZZ_CHECK(!cpuinfo->processors.empty(), "cpuinfo accepted without processors");
  const std::vector<std::string> common = probe::CommonRawFlags(*cpuinfo);
  FUZZ_CHECK(common.size() <= cpuinfo->processors.front().flags.size(),
             "more common flags than the first CPU has");
  std::vector<std::string> flags = probe::NormaliseCpuFlags(common, cpuinfo->flags_are_arm);
  (void)probe::CpuFlagsSupportBf16(flags);
  (void)probe::CpuFlagsSupportFp16(flags);
  (void)probe::DropAmxFlags(&flags);
  (void)probe::CpuModelName(*cpuinfo, "");
  (void)probe::CpuModelName(*cpuinfo, cpuinfo->board_model);
  for (const probe::CpuInfoProcessor& processor : cpuinfo->processors) {
    if (processor.arm_implementer && processor.arm_part) {
      FUZZ_CHECK(!probe::ArmCoreNameOrIds(*processor.arm_implementer, *processor.arm_part).empty(),
                 "an ARM core without a name or ids");
    }
  }
}

// The digits of the last MemTotal line (the one the parser keeps), when it
// has the "<number> kB" form.
std::optional<absl::string_view> MemTotalDigits(absl::string_view text) {
  std::optional<absl::string_view> digits;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::StripAsciiWhitespace(line.substr(0, colon)) != "MemTotal") continue;
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (!absl::ConsumeSuffix(&value, "kB")) return std::nullopt;
    digits = absl::StripAsciiWhitespace(value);
  }
  return digits;
}

void CheckMemInfo(absl::string_view text) {
  absl::StatusOr<probe::MemInfo> meminfo = probe::ParseMemInfo(text);
  if (!meminfo.ok()) {
    FUZZ_CHECK(IsCleanRefusal(meminfo.status()), meminfo.status().ToString());
    return;
  }
  // The kernel's figure is KiB: the bytes must be exactly 1024 times it,
  // not a product that wrapped around 2^64.
  const std::optional<absl::string_view> digits = MemTotalDigits(text);
  FUZZ_CHECK(digits.has_value(), "meminfo accepted without a MemTotal kB line");
  uint64_t kilobytes = 0;
  FUZZ_CHECK(absl::SimpleAtoi(*digits, &kilobytes), "MemTotal accepted without a number");
  FUZZ_CHECK(meminfo->total_bytes / 1024 == kilobytes && meminfo->total_bytes % 1024 == 0,
             absl::StrCat("MemTotal ", *digits, " kB became ", meminfo->total_bytes, " bytes"));
}

void CheckCpuLimit(const absl::StatusOr<std::optional<uint32_t>>& cpus, absl::string_view what) {
  if (!cpus.ok()) {
    FUZZ_CHECK(IsCleanRefusal(cpus.status()), cpus.status().ToString());
    return;
  }
  // A quota is a positive amount of CPU time: it allows at least one CPU.
  FUZZ_CHECK(!cpus->has_value() || **cpus >= 1, absl::StrCat(what, " allowed 0 CPUs"));
}

// Four GPUs, two sharing a UUID prefix, one in MIG mode with two slices.
const std::vector<probe::NvidiaGpu>& FuzzGpus() {
  static const std::vector<probe::NvidiaGpu>* gpus = [] {
    auto* list = new std::vector<probe::NvidiaGpu>(4);
    const char* uuids[] = {"GPU-0a1b", "GPU-6e7f", "GPU-6f80", "GPU-a100"};
    for (size_t i = 0; i < list->size(); ++i) {
      (*list)[i].index = static_cast<uint32_t>(i);
      (*list)[i].uuid = uuids[i];
      (*list)[i].capability_major = i == 0 ? 7 : 9;
    }
    (*list)[3].mig_enabled = true;
    (*list)[3].mig_instances.resize(2);
    (*list)[3].mig_instances[0].uuid = "MIG-c0ff";
    (*list)[3].mig_instances[1].uuid = "MIG-d00d";
    (*list)[3].mig_instances[1].gpu_instance_id = 2;
    return list;
  }();
  return *gpus;
}

void CheckVisibility(absl::string_view text) {
  for (const char* order : {"PCI_BUS_ID", "FASTEST_FIRST"}) {
    const probe::GpuVisibility visibility =
        probe::ResolveCudaVisibleDevices(FuzzGpus(), std::string(text), std::string(order));
    // Each device at most once, never a whole MIG-enabled GPU, never more
    // devices than exist, and a refusal shows nothing.
    FUZZ_CHECK(visibility.visible.size() <= 5, "more visible devices than exist");
    FUZZ_CHECK(visibility.refused.empty() || visibility.visible.empty(),
               "a refused list shows devices");
    for (size_t i = 0; i < visibility.visible.size(); ++i) {
      const probe::CudaDeviceRef& ref = visibility.visible[i];
      FUZZ_CHECK(ref.gpu < FuzzGpus().size(), "a device past the list");
      FUZZ_CHECK(FuzzGpus()[ref.gpu].mig_enabled == ref.mig.has_value(),
                 "a MIG-enabled GPU as a device, or a slice of a plain GPU");
      for (size_t j = 0; j < i; ++j) FUZZ_CHECK(!(visibility.visible[j] == ref), "a device twice");
    }
    for (const std::string& note : visibility.notes) FUZZ_CHECK(note.size() < 1024, "a huge note");
  }
}

void CheckGpuInventory(absl::string_view text) {
  for (const std::string& candidate :
       {std::string(text), absl::StrCat("weightpath-gpu-inventory 1\n2\nfp", text)}) {
    absl::StatusOr<probe::NvidiaInventory> inventory = probe::ParseGpuInventory(candidate, "fp");
    if (!inventory.ok()) continue;  // refused: the driver is asked instead
    FUZZ_CHECK(!inventory->query.gpus.empty() &&
                   inventory->query.gpus.size() <= probe::kMaxNvidiaGpus,
               "an inventory out of bounds accepted");
    for (const probe::NvidiaGpu& gpu : inventory->query.gpus) {
      FUZZ_CHECK(gpu.name.size() <= 256 && gpu.uuid.size() <= 256 &&
                     gpu.mig_instances.size() <= probe::kMaxMigInstancesPerGpu,
                 "a GPU out of bounds accepted");
    }
  }
}

}  // namespace
}  // namespace weightpath::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  const std::string_view raw = fuzz::Text(data, size);
  const absl::string_view text(raw.data(), raw.size());
  fuzz::CheckCpuInfo(text);
  fuzz::CheckMemInfo(text);

  absl::StatusOr<probe::CgroupMembership> cgroup = probe::ParseProcSelfCgroup(text);
  if (!cgroup.ok()) FUZZ_CHECK(fuzz::IsCleanRefusal(cgroup.status()), cgroup.status().ToString());

  fuzz::CheckCpuLimit(probe::ParseCpuMax(text), "cpu.max");
  const std::vector<absl::string_view> lines = absl::StrSplit(text, absl::MaxSplits('\n', 2));
  fuzz::CheckCpuLimit(probe::ParseCfsQuota(lines[0], lines.size() > 1 ? lines[1] : ""),
                      "cpu.cfs_quota_us");

  absl::StatusOr<std::optional<uint64_t>> memory = probe::ParseMemoryLimit(text);
  if (!memory.ok()) FUZZ_CHECK(fuzz::IsCleanRefusal(memory.status()), memory.status().ToString());

  fuzz::CheckVisibility(text);
  fuzz::CheckGpuInventory(text);
  if (auto release = probe::ParseL4tRelease(text)) {
    FUZZ_CHECK(release->text.size() <= 4 + 1 + 16, "an L4T release past its bound");
  }

  for (bool android : {false, true}) {
    const std::string os = probe::HostOsFromKernel(text, android);
    FUZZ_CHECK(os == "linux" || os == "android" || os == "wsl2", absl::StrCat("host os ", os));
  }
  return 0;
}
