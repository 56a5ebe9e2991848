#include "ctl/device_command.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/control_characters.h"
#include "common/proto_time.h"
#include "ctl/admin_output.h"
#include "ctl/admin_query.h"
#include "ctl/command_error.h"
#include "ctl/resolve_output.h"
#include "ctl/view_output.h"

namespace weightpath::ctl {
namespace {

constexpr std::string_view kCommand = "device";

constexpr char kUsage[] =
    "usage: weightpathctl device show DEVICE_ID [-o table|json|yaml] [flags]\n\n"
    "The device's registry record (GetDevice): labels, hardware class and profile\n"
    "summary, agent version, first and last seen; the hardware it last sent (CPUs,\n"
    "memory, each GPU with its memory and compute capability, the GPU dtypes, the\n"
    "driver and the Jetson L4T release where present); its last decision (path, model,\n"
    "priority, artifact, policy version, rollout); its regressions; and the\n"
    "verification cell of its path on its class and CPU model\n"
    "(GetVerificationMatrix): how many devices reported it and their median figures;\n"
    "and the device's own last measurements and last outcomes (boot, engine start,\n"
    "tasks), newest received first, at most 10 of each. Text the device sent is\n"
    "shown with control characters as \\xNN. A rollout's counts of outcomes over\n"
    "all its devices are in 'weightpathctl rollout status ID'.";

const std::vector<FlagSpec>& DeviceFlags() {
  static const std::vector<FlagSpec> flags = ViewFlags({});
  return flags;
}

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

// Values carry what devices sent (labels, CPU model, paths, details): a
// control character in them must not start a line of its own or drive the
// operator's terminal.
void Line(std::ostream& out, std::string_view label, const std::string& value) {
  std::string padded(label);
  padded.resize(std::max<size_t>(padded.size() + 2, 18), ' ');
  out << "  " << padded << ControlEscaped(value) << "\n";
}

std::string OutcomeWord(v1::Outcome outcome) {
  std::string name = v1::Outcome_Name(outcome);
  if (name.empty()) return absl::StrCat("outcome ", static_cast<int>(outcome));
  if (absl::StartsWith(name, "OUTCOME_")) name.erase(0, 8);
  return absl::AsciiStrToLower(name);
}

std::string MeasurementSummary(const v1::DeviceMeasurement& m) {
  std::string text = absl::StrCat(
      OrDash(m.path()), ": decode ", FormatFigure(m.decode_tok_s(), 1), " tok/s, prefill ",
      FormatFigure(m.prefill_tok_s(), 1), " tok/s, gemm ", FormatFigure(m.gemm_ms_per_step(), 1),
      " ms/step, step ", FormatFigure(m.step_ms(), 1), " ms, ",
      Counted(m.threads(), "thread", "threads"));
  if (m.fidelity_prompts() > 0) {
    absl::StrAppend(&text, ", fidelity ", m.fidelity_exact_matches(), " of ",
                    m.fidelity_prompts(), " exact");
  }
  if (!m.engine_version().empty()) absl::StrAppend(&text, ", engine ", m.engine_version());
  if (m.regression()) {
    absl::StrAppend(&text, "; regression: ", OrDash(m.regression_reason()));
  } else if (!m.regression_reason().empty()) {
    absl::StrAppend(&text, "; ", m.regression_reason());
  }
  return text;
}

std::string OutcomeSummary(const v1::DeviceOutcome& o) {
  std::string text = OutcomeWord(o.outcome());
  if (o.outcome() == v1::OUTCOME_TASKS) {
    absl::StrAppend(&text, " (", o.tasks_completed(), " completed, ", o.tasks_undone(),
                    " undone, ", o.tasks_failed(), " failed)");
  }
  absl::StrAppend(&text, ": path ", OrDash(o.path()), ", rollout ",
                  o.rollout_id().empty() ? "none" : o.rollout_id(), ", policy ",
                  OrDash(o.policy_version()));
  if (!o.artifact_sha256().empty()) absl::StrAppend(&text, ", sha256 ", o.artifact_sha256());
  if (!o.detail().empty()) absl::StrAppend(&text, ", detail \"", o.detail(), "\"");
  return text;
}

void WriteReports(const v1::Device& device, std::ostream& out) {
  out << "last measurements (newest received first)\n";
  if (device.recent_measurements().empty()) Line(out, "none", "the device has reported none");
  for (const v1::DeviceMeasurement& m : device.recent_measurements()) {
    Line(out, FormatTimestamp(m.measured_at()), MeasurementSummary(m));
  }
  out << "last outcomes (newest received first)\n";
  if (device.recent_outcomes().empty()) Line(out, "none", "the device has reported none");
  for (const v1::DeviceOutcome& o : device.recent_outcomes()) {
    Line(out, FormatTimestamp(o.observed_at()), OutcomeSummary(o));
  }
}

std::string SeenAt(const google::protobuf::Timestamp& at, absl::Time now) {
  if (at.seconds() == 0 && at.nanos() == 0) return "-";
  return absl::StrCat(FormatTimestamp(at), " (", FormatSeconds(now - FromProtoTime(at)), " ago)");
}

std::string SourceWord(v1::BootSource source) {
  switch (source) {
    case v1::BOOT_SOURCE_SERVER:
      return "server";
    case v1::BOOT_SOURCE_LAST_GOOD:
      return "last good (the server was unreachable at boot)";
    case v1::BOOT_SOURCE_OFFLINE:
      return "offline (the device's own policy)";
    default:
      return "-";
  }
}

// What the device says it runs, beside the assignment above.
void WriteRunning(const v1::Device& device, absl::Time now, std::ostream& out) {
  out << "running (as the device last reported)\n";
  if (!device.has_running()) {
    Line(out, "weight path", "not reported (no lifecycle report yet, or an older agent)");
    return;
  }
  const v1::RunningBuild& running = device.running();
  if (running.nothing_running()) {
    Line(out, "weight path", "nothing runs (the engine did not start)");
  } else {
    Line(out, "weight path", OrDash(running.path()));
    Line(out, "model", OrDash(running.model()));
    if (!running.artifact_sha256().empty()) Line(out, "sha256", running.artifact_sha256());
    Line(out, "decision etag", OrDash(running.decision_etag()));
    Line(out, "source", SourceWord(running.source()));
  }
  Line(out, "reported", SeenAt(device.running_reported_at(), now));
  Line(out, "running since", SeenAt(device.running_since(), now));
  Line(out, "drift", device.has_drift() ? DriftText(device, now) : "none: it runs its assignment");
}

std::string Figure(const v1::FigureStats& stats, std::string_view unit) {
  if (stats.samples() == 0) return "-";
  return absl::StrCat("median ", FormatFigure(stats.median(), stats.samples()), " ",
                      absl::string_view(unit.data(), unit.size()), " (min ",
                      FormatFigure(stats.min(), stats.samples()), ", max ",
                      FormatFigure(stats.max(), stats.samples()), ", ",
                      Counted(stats.samples(), "sample", "samples"), ")");
}

std::string GiB(uint64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

// A CPU lists a hundred flags or more; the line names the ones weight
// builds and rules care about (the rest are in -o json|yaml).
std::string FlagSummary(const google::protobuf::RepeatedPtrField<std::string>& flags) {
  if (flags.empty()) return "-";
  if (flags.size() <= 12) return absl::StrJoin(flags, ",");
  static constexpr std::string_view kNotable[] = {
      "amx_tile", "amx_bf16", "amx_int8", "avx512f", "avx512_bf16", "avx512_vnni", "avx512_fp16",
      "avx_vnni", "avx2", "fma", "f16c", "asimd", "asimddp", "i8mm", "bf16", "sve", "sve2",
      "svebf16", "svei8mm", "sme"};
  std::vector<std::string> present;
  for (std::string_view notable : kNotable) {
    if (std::find(flags.begin(), flags.end(), notable) != flags.end()) {
      present.emplace_back(notable);
    }
  }
  return absl::StrCat(flags.size(), " flags; ",
                      present.empty() ? std::string("none of the notable ones")
                                      : absl::StrCat("notable: ", absl::StrJoin(present, ",")),
                      " (all with -o json)");
}

std::string Capability(const google::protobuf::RepeatedField<uint32_t>& capability) {
  return capability.size() >= 2 ? absl::StrCat(capability[0], ".", capability[1]) : "-";
}

std::string GpuSummary(const v1::GpuDevice& gpu) {
  std::string text = absl::StrCat(gpu.index(), ": ", OrDash(gpu.name()), ", ",
                                  GiB(gpu.memory_total_bytes()));
  if (gpu.has_memory_free_bytes()) absl::StrAppend(&text, " (", GiB(gpu.memory_free_bytes()), " free)");
  absl::StrAppend(&text, ", capability ", Capability(gpu.capability()));
  if (gpu.sm_count() != 0) absl::StrAppend(&text, ", ", gpu.sm_count(), " SMs");
  if (gpu.integrated()) absl::StrAppend(&text, ", integrated");
  if (gpu.mig_enabled()) {
    absl::StrAppend(&text, ", MIG: ", Counted(gpu.mig_instances_size(), "instance", "instances"));
  }
  absl::StrAppend(&text, gpu.usable() ? ", usable" : ", not usable");
  if (!gpu.reason().empty()) absl::StrAppend(&text, " (", gpu.reason(), ")");
  return text;
}

// What the device last sent, as the registry keeps it: a device not seen
// since profiles were kept has only the summary above.
void WriteHardware(const v1::Device& device, absl::Time now, std::ostream& out) {
  if (!device.has_hardware_profile()) {
    out << "hardware\n";
    Line(out, "profile", "not kept (the device has not resolved since the registry began keeping "
                         "profiles)");
    return;
  }
  const v1::HardwareProfile& hw = device.hardware_profile();
  out << "hardware (as the device last sent it)\n";
  if (device.has_profile_recorded_at()) Line(out, "sent", SeenAt(device.profile_recorded_at(), now));
  std::string cpus = absl::StrCat(hw.n_logical(), " logical, ", hw.n_physical(), " physical");
  if (hw.numa_nodes() > 1) absl::StrAppend(&cpus, ", ", hw.numa_nodes(), " NUMA nodes");
  Line(out, "cpus", cpus);
  Line(out, "memory", hw.ram_total_bytes() == 0
                          ? std::string("-")
                          : absl::StrCat(GiB(hw.ram_total_bytes()), " total, ",
                                         GiB(hw.ram_available_bytes()), " available"));
  if (hw.gpus_size() > 0) {
    for (const v1::GpuDevice& gpu : hw.gpus()) Line(out, "gpu", GpuSummary(gpu));
  } else if (!hw.gpu_name().empty()) {
    std::string text = absl::StrCat(hw.gpu_name(), ", ", GiB(hw.gpu_mem_bytes()), ", capability ",
                                    Capability(hw.gpu_capability()));
    if (hw.gpu_sm_count() != 0) absl::StrAppend(&text, ", ", hw.gpu_sm_count(), " SMs");
    Line(out, "gpu", text);
  }
  if (hw.gpus_size() > 0 || !hw.gpu_name().empty()) {
    std::vector<std::string> dtypes;
    if (hw.supports_bf16()) dtypes.push_back("bf16");
    if (hw.supports_fp16()) dtypes.push_back("fp16");
    Line(out, "gpu dtypes", dtypes.empty() ? std::string("neither bf16 nor fp16")
                                           : absl::StrJoin(dtypes, ", "));
  }
  if (!hw.gpu_driver_version().empty() || !hw.cuda_driver_version().empty()) {
    Line(out, "gpu driver", absl::StrCat(OrDash(hw.gpu_driver_version()), " (CUDA ",
                                         OrDash(hw.cuda_driver_version()), ")"));
  }
  if (!hw.l4t_release().empty() || hw.l4t_major() != 0) {
    Line(out, "l4t", hw.l4t_release().empty() ? absl::StrCat(hw.l4t_major()) : hw.l4t_release());
  }
  for (const v1::AcceleratorInfo& accelerator : hw.accelerators()) {
    Line(out, "accelerator", absl::StrCat(OrDash(accelerator.kind()), " ", OrDash(accelerator.vendor()),
                                          " ", OrDash(accelerator.name()),
                                          accelerator.usable() ? ": usable" : ": not usable",
                                          accelerator.reason().empty() ? "" : " (",
                                          accelerator.reason(),
                                          accelerator.reason().empty() ? "" : ")"));
  }
  for (const std::string& note : hw.probe_notes()) Line(out, "probe note", note);
}

// The matrix cells for the device's path on its class and CPU model.
v1::GetVerificationMatrixResponse CellsFor(const v1::Device& device,
                                           const v1::GetVerificationMatrixResponse& matrix) {
  v1::GetVerificationMatrixResponse cells;
  cells.set_policy_version(matrix.policy_version());
  for (const v1::VerificationCell& cell : matrix.cells()) {
    if (cell.path() == device.path() && cell.hardware_class() == device.hardware_class() &&
        cell.cpu_model() == device.profile().cpu_model()) {
      *cells.add_cells() = cell;
    }
  }
  return cells;
}

void WriteTable(const v1::Device& device, const v1::GetVerificationMatrixResponse* cells,
                std::ostream& out) {
  const absl::Time now = absl::Now();
  out << "device " << ControlEscaped(device.device_id()) << "\n";
  Line(out, "labels", FormatLabels(device.labels()));
  Line(out, "hardware class", OrDash(device.hardware_class()));
  const v1::ProfileSummary& profile = device.profile();
  Line(out, "arch", OrDash(profile.arch()));
  Line(out, "cpu", OrDash(profile.cpu_model()));
  Line(out, "cpu flags", FlagSummary(profile.cpu_flags()));
  Line(out, "accelerator", OrDash(profile.accelerator()));
  Line(out, "agent version", OrDash(device.agent_version()));
  Line(out, "first seen", SeenAt(device.first_seen(), now));
  Line(out, "last seen", SeenAt(device.last_seen(), now));
  WriteHardware(device, now, out);

  out << "last decision\n";
  Line(out, "weight path", OrDash(device.path()));
  Line(out, "model", OrDash(device.model()));
  // A device that never resolved has no priority yet: "-", as every unset field.
  Line(out, "priority", device.effective_priority() == v1::PRIORITY_UNSPECIFIED
                            ? std::string("-")
                            : PriorityWord(device.effective_priority()));
  if (device.requested_priority() != v1::PRIORITY_UNSPECIFIED &&
      device.requested_priority() != device.effective_priority()) {
    Line(out, "asked for", PriorityWord(device.requested_priority()));
  }
  const v1::Artifact& artifact = device.artifact();
  Line(out, "artifact", ArtifactSummary(artifact));
  if (!artifact.version().empty()) Line(out, "version", artifact.version());
  if (!artifact.sha256().empty()) Line(out, "sha256", artifact.sha256());
  Line(out, "policy version", OrDash(device.policy_version()));
  Line(out, "rollout", device.rollout_id().empty() ? "no rollout" : device.rollout_id());

  WriteRunning(device, now, out);
  WriteReports(device, out);

  out << "measurements\n";
  Line(out, "regressions", device.regression_count() == 0
                               ? std::string("none")
                               : absl::StrCat(Counted(device.regression_count(), "regression",
                                                      "regressions"),
                                              ", last: ", OrDash(device.last_regression())));
  if (cells == nullptr) {
    Line(out, "fleet evidence", "not read (the error follows on stderr)");
    return;
  }
  if (cells->cells().empty()) {
    Line(out, "fleet evidence",
         absl::StrCat("no reports yet for ", OrDash(device.path()), " on ",
                      OrDash(device.hardware_class()), " / ", OrDash(profile.cpu_model())));
  }
  for (const v1::VerificationCell& cell : cells->cells()) {
    Line(out, "fleet evidence",
         absl::StrCat(cell.path(), " on ", cell.hardware_class(), " / ", cell.cpu_model(), ": ",
                      Counted(cell.device_count(), "device", "devices"), " reported",
                      cell.verified() ? ", verified" : ", not verified"));
    Line(out, "decode", Figure(cell.decode_tok_s(), "tok/s"));
    Line(out, "prefill", Figure(cell.prefill_tok_s(), "tok/s"));
    if (cell.fidelity_prompts() > 0) {
      Line(out, "fidelity", absl::StrCat(cell.fidelity_exact_matches(), " of ",
                                         Counted(cell.fidelity_prompts(), "prompt", "prompts"),
                                         " exact"));
    }
    Line(out, "fleet regressions", absl::StrCat(cell.regressions()));
    Line(out, "last measured", SeenAt(cell.last_measured(), now));
  }
}

}  // namespace

int RunDeviceCommand(const std::vector<std::string>& args, CommandIo io) {
  const std::string help = absl::StrCat(kUsage, "\n\n", FlagHelp(DeviceFlags()));
  if (args.empty()) return NoArguments(io.err, help);
  if (args.front() == "--help" || args.front() == "-h" || args.front() == "help") {
    return ShowHelp(io.out, help);
  }
  if (args.front() != "show") {
    return UsageError(io.err, "weightpathctl device",
                      absl::StrCat("unknown action '", args.front(), "' (show)"), kUsage);
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (rest.empty() || rest.front().empty() || rest.front()[0] == '-') {
    if (!rest.empty() && (rest.front() == "--help" || rest.front() == "-h")) {
      return ShowHelp(io.out, help);
    }
    return UsageError(io.err, "weightpathctl device",
                      "device show needs the device ID as its first argument", kUsage);
  }
  const std::string id = rest.front();
  rest.erase(rest.begin());
  int exit_code = kExitOk;
  const std::optional<ParsedArguments> arguments = ParseFlags(
      kCommand, rest, DeviceFlags(), [&help](std::ostream& out) { out << help; }, io, &exit_code);
  if (!arguments.has_value()) return exit_code;
  absl::StatusOr<ViewOutput> output = ParseViewOutput(arguments->Value("output"));
  if (!output.ok()) return ReportError(kCommand, output.status(), io.err);
  absl::StatusOr<FleetAdminConnection> connection = FleetAdminConnection::Open(*arguments);
  if (!connection.ok()) return ReportError(kCommand, connection.status(), io.err);
  v1::GetDeviceRequest request;
  request.set_device_id(id);
  absl::StatusOr<v1::Device> device =
      CallFleetAdmin(*connection, &v1::FleetAdmin::Stub::GetDevice, request, "GetDevice");
  if (!device.ok()) return ReportServerError(kCommand, device.status(), io.err);
  // The record is worth showing even when the matrix cannot be read; the
  // failure is still reported and the exit code says so.
  absl::StatusOr<v1::GetVerificationMatrixResponse> matrix =
      CallFleetAdmin(*connection, &v1::FleetAdmin::Stub::GetVerificationMatrix,
                     v1::GetVerificationMatrixRequest(), "GetVerificationMatrix");
  const v1::GetVerificationMatrixResponse cells =
      matrix.ok() ? CellsFor(*device, *matrix) : v1::GetVerificationMatrixResponse();
  if (*output != ViewOutput::kTable) {
    std::vector<NamedMessage> parts = {{"device", &*device}};
    if (matrix.ok()) parts.push_back({"verification", &cells});
    absl::Status written = WriteMessages(parts, *output, io.out);
    if (!written.ok()) return ReportError(kCommand, written, io.err);
  } else {
    WriteTable(*device, matrix.ok() ? &cells : nullptr, io.out);
  }
  if (!matrix.ok()) return ReportServerError(kCommand, matrix.status(), io.err);
  return kExitOk;
}

}  // namespace weightpath::ctl
