#include "agent/probe/profile_text.h"

#include <regex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "policy/hardware_class.h"

namespace weightpath::probe {
namespace {

std::string GiB(uint64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

// "3-6" for a run of consecutive CPUs, "0,2" otherwise.
std::string CpuList(const v1::CpuCluster& cluster) {
  std::vector<std::string> ranges;
  const auto& cpus = cluster.cpus();
  for (int i = 0; i < cpus.size();) {
    int j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    ranges.push_back(i == j ? absl::StrCat(cpus[i]) : absl::StrCat(cpus[i], "-", cpus[j]));
    i = j + 1;
  }
  return absl::StrJoin(ranges, ",");
}

}  // namespace

std::string ProfileText(const v1::HardwareProfile& profile) {
  std::string text;
  absl::StrAppend(&text, "source:         ", profile.source(), "\n");
  absl::StrAppend(&text, "arch:           ", profile.arch(), "\n");
  absl::StrAppend(&text, "cpu_model:      ", profile.cpu_model(), "\n");
  absl::StrAppend(&text, "cpu_flags:      ", absl::StrJoin(profile.cpu_flags(), " "), "\n");
  absl::StrAppend(&text, "cpus:           ", profile.n_logical(), " logical, ",
                  profile.n_physical(), " physical, ", profile.numa_nodes(), " NUMA node(s)\n");
  std::vector<std::string> clusters;
  for (const v1::CpuCluster& cluster : profile.clusters()) {
    clusters.push_back(absl::StrCat(cluster.max_khz(), " kHz [", CpuList(cluster), "]"));
  }
  absl::StrAppend(&text, "clusters:       ",
                  clusters.empty() ? "(unknown)" : absl::StrJoin(clusters, "; "), "\n");
  absl::StrAppend(&text, "ram:            ", GiB(profile.ram_total_bytes()), " total, ",
                  GiB(profile.ram_available_bytes()), " available\n");
  absl::StrAppend(&text, "accelerator:    ", profile.accelerator(), "\n");
  if (!profile.gpu_name().empty()) {
    absl::StrAppend(&text, "gpu:            ", profile.gpu_name(), ", ",
                    GiB(profile.gpu_mem_bytes()));
    if (profile.gpu_capability_size() == 2) {
      absl::StrAppend(&text, ", capability ", profile.gpu_capability(0), ".",
                      profile.gpu_capability(1));
    }
    if (profile.gpu_sm_count() > 0) absl::StrAppend(&text, ", ", profile.gpu_sm_count(), " SMs");
    absl::StrAppend(&text, "\n");
  }
  for (const v1::GpuDevice& gpu : profile.gpus()) {
    absl::StrAppend(&text, "gpu ", gpu.index(), ":          ", gpu.name(), ", ",
                    GiB(gpu.memory_total_bytes()));
    if (gpu.has_memory_free_bytes()) {
      absl::StrAppend(&text, " (", GiB(gpu.memory_free_bytes()), " free)");
    }
    if (gpu.capability_size() == 2) {
      absl::StrAppend(&text, ", capability ", gpu.capability(0), ".", gpu.capability(1));
    }
    absl::StrAppend(&text, gpu.pci_bus_id().empty() ? "" : ", ", gpu.pci_bus_id(),
                    gpu.mig_enabled() ? ", MIG" : "", ", ", gpu.usable() ? "usable" : "not usable",
                    " (", gpu.reason(), ")\n");
    for (const v1::MigInstance& instance : gpu.mig_instances()) {
      absl::StrAppend(&text, "  mig ", instance.profile(), ": ", GiB(instance.memory_total_bytes()),
                      ", ", instance.sm_count(), " SMs, ", instance.uuid(), ", ",
                      instance.usable() ? "usable" : "not usable", " (", instance.reason(), ")\n");
    }
  }
  if (!profile.gpu_driver_version().empty() || !profile.cuda_driver_version().empty()) {
    absl::StrAppend(&text, "nvidia driver:  ", profile.gpu_driver_version(), ", CUDA ",
                    profile.cuda_driver_version(), ", inventory from ",
                    profile.gpu_inventory_source(), "\n");
  }
  if (!profile.l4t_release().empty()) {
    absl::StrAppend(&text, "l4t:            R", profile.l4t_release(), "\n");
  }
  absl::StrAppend(&text, "precision:      bf16 ", profile.supports_bf16() ? "yes" : "no",
                  ", fp16 ", profile.supports_fp16() ? "yes" : "no", "\n");
  absl::StrAppend(&text, "host_os:        ", profile.host_os(), ", ", profile.thermal_zones(),
                  " thermal zone(s)\n");

  const auto hardware_class = policy::ClassifyHardware(profile);
  absl::StrAppend(&text, "hardware_class: ",
                  hardware_class.ok() ? std::string(policy::HardwareClassName(*hardware_class))
                                      : absl::StrCat("none (", hardware_class.status().message(),
                                                     ")"),
                  "\n");

  absl::StrAppend(&text, "accelerators:\n");
  if (profile.accelerators().empty()) absl::StrAppend(&text, "  (none found)\n");
  for (const v1::AcceleratorInfo& info : profile.accelerators()) {
    absl::StrAppend(&text, "  ", info.usable() ? "usable:     " : "not usable: ", info.kind(), " ",
                    info.vendor(), " ", info.name(), " -- ", info.reason(), "\n");
  }
  if (!profile.probe_notes().empty()) {
    absl::StrAppend(&text, "notes:\n");
    for (const std::string& note : profile.probe_notes()) absl::StrAppend(&text, "  ", note, "\n");
  }
  return text;
}

absl::StatusOr<std::string> ProfileJson(const v1::HardwareProfile& profile) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  const auto printed = google::protobuf::util::MessageToJsonString(profile, &json, options);
  if (!printed.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print the profile as JSON: ", std::string(printed.message())));
  }
  // Quotes inside string values are escaped (\"), so this only matches the
  // fields themselves.
  static const std::regex kQuotedCount(
      R"re("(max_khz|ram_total_bytes|ram_available_bytes|gpu_mem_bytes|memory_total_bytes|memory_free_bytes|gpus_probed_unix_seconds)": "([0-9]+)")re");
  return std::regex_replace(json, kQuotedCount, R"re("$1": $2)re");
}

}  // namespace weightpath::probe
