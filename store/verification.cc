#include "store/verification.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "policy/cpu_model.h"
#include "store/time_convert.h"

namespace weightpath::store {
namespace {

std::string FormatFigure(double value) { return absl::StrFormat("%.1f", value); }

std::string FormatWindow(absl::Duration window) {
  if (window % absl::Hours(24) == absl::ZeroDuration()) {
    return absl::StrCat(window / absl::Hours(24), "d");
  }
  return absl::FormatDuration(window);
}

// Median, min and max of the positive values (0 = not measured).
v1::FigureStats Stats(std::vector<double> values) {
  v1::FigureStats stats;
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !(v > 0); }),
               values.end());
  if (values.empty()) return stats;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  stats.set_median(n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2);
  stats.set_min(values.front());
  stats.set_max(values.back());
  stats.set_samples(static_cast<uint32_t>(n));
  return stats;
}

const policy::ExpectedFigures* FidelityExpectation(
    std::string_view cpu_model, const std::vector<policy::ExpectedFigures>& expected) {
  const policy::ExpectedFigures* any = nullptr;
  const std::string normalized = policy::NormalizeCpuModel(cpu_model);
  for (const policy::ExpectedFigures& figures : expected) {
    if (!figures.fidelity_exact_matches.has_value() || !figures.fidelity_prompts.has_value() ||
        *figures.fidelity_prompts == 0) {
      continue;
    }
    if (policy::FiguresMatchCpu(figures, normalized)) return &figures;
    if (any == nullptr) any = &figures;
  }
  return any;
}

}  // namespace

RegressionVerdict IsRegression(const StoredMeasurement& measurement,
                               const std::vector<policy::ExpectedFigures>& expected,
                               double regression_fraction) {
  const std::string cpu = policy::NormalizeCpuModel(measurement.cpu_model);
  for (const policy::ExpectedFigures& figures : expected) {
    if (!figures.decode_tok_s.has_value()) continue;
    if (!policy::FiguresMatchCpu(figures, cpu)) continue;
    if (figures.threads != 0 && figures.threads != measurement.threads) continue;
    const double floor = regression_fraction * *figures.decode_tok_s;
    if (measurement.decode_tok_s < floor) {
      return {true, true, absl::StrCat("decode_tok_s ", FormatFigure(measurement.decode_tok_s),
                                 " is below ", FormatFigure(regression_fraction * 100),
                                 "% of the ", FormatFigure(*figures.decode_tok_s),
                                 " tok/s expected for path ", measurement.path, " on ",
                                 figures.cpu_model, " with ", figures.threads, " threads")};
    }
    return {};
  }
  RegressionVerdict unjudged;
  unjudged.judged = false;
  std::vector<std::string> known;
  for (const policy::ExpectedFigures& figures : expected) {
    if (!figures.decode_tok_s.has_value()) continue;
    std::string names = figures.cpu_model;
    if (!figures.cpu_model_aliases.empty()) {
      absl::StrAppend(&names, " (or ", absl::StrJoin(figures.cpu_model_aliases, ", "), ")");
    }
    known.push_back(figures.threads == 0 ? names
                                         : absl::StrCat(names, " at ", figures.threads, " threads"));
  }
  if (known.empty()) {
    unjudged.reason = absl::StrCat("not judged: the policy has no expected decode figure for path ",
                                   measurement.path, " on this hardware class");
  } else {
    unjudged.reason = absl::StrCat("not judged: no expected figure for CPU ", measurement.cpu_model,
                                   " at ", measurement.threads, " threads (path ", measurement.path,
                                   " has figures for ", absl::StrJoin(known, "; "), ")");
  }
  return unjudged;
}

std::vector<policy::ExpectedFigures> ExpectedFor(const std::vector<PathExpectation>& expectations,
                                                 std::string_view path,
                                                 std::string_view hardware_class) {
  std::vector<policy::ExpectedFigures> out;
  for (const PathExpectation& expectation : expectations) {
    if (expectation.path != path) continue;
    if (!expectation.hardware_class.empty() && expectation.hardware_class != hardware_class) continue;
    out.insert(out.end(), expectation.expected.begin(), expectation.expected.end());
  }
  return out;
}

bool PolicyVerified(const std::vector<PathExpectation>& expectations, std::string_view path,
                    std::string_view hardware_class) {
  for (const PathExpectation& expectation : expectations) {
    if (expectation.path == path && expectation.policy_verified &&
        (expectation.hardware_class.empty() || expectation.hardware_class == hardware_class)) {
      return true;
    }
  }
  return false;
}

bool FidelityCollapsed(uint64_t exact_matches, uint64_t prompts, std::string_view cpu_model,
                       const std::vector<policy::ExpectedFigures>& expected) {
  if (prompts == 0) return false;
  const policy::ExpectedFigures* figures = FidelityExpectation(cpu_model, expected);
  if (figures == nullptr) return false;
  const double expected_rate =
      static_cast<double>(*figures->fidelity_exact_matches) / *figures->fidelity_prompts;
  const double rate = static_cast<double>(exact_matches) / prompts;
  return rate < 0.5 * expected_rate;
}

std::vector<v1::VerificationCell> BuildVerificationMatrix(
    const std::vector<StoredMeasurement>& measurements,
    const std::vector<PathExpectation>& expectations, const VerificationConfig& config,
    absl::Time now) {
  using CellKey = std::tuple<std::string, std::string, std::string>;
  std::map<CellKey, std::vector<const StoredMeasurement*>> groups;
  const absl::Time since = now - config.window;
  for (const StoredMeasurement& measurement : measurements) {
    if (measurement.measured_at < since || measurement.measured_at > now) continue;
    groups[{measurement.path, measurement.hardware_class, policy::NormalizeCpuModel(measurement.cpu_model)}]
        .push_back(&measurement);
  }

  std::vector<v1::VerificationCell> cells;
  for (auto& [key, reports] : groups) {
    const auto& [path, hardware_class, normalized_cpu] = key;
    std::sort(reports.begin(), reports.end(), [](const auto* a, const auto* b) {
      return std::tie(a->measured_at, a->measurement_id) < std::tie(b->measured_at, b->measurement_id);
    });
    const std::vector<policy::ExpectedFigures> expected = ExpectedFor(expectations, path, hardware_class);

    v1::VerificationCell cell;
    cell.set_path(path);
    cell.set_hardware_class(hardware_class);
    cell.set_cpu_model(reports.back()->cpu_model);
    std::vector<double> decode, prefill, gemm, step;
    uint64_t exact = 0, prompts = 0;
    uint32_t regressions = 0;
    std::map<std::string, bool> latest_regressed;  // device -> its latest report regressed
    std::map<std::string, bool> latest_judged;     // device -> its latest report was judged
    for (const StoredMeasurement* report : reports) {
      decode.push_back(report->decode_tok_s);
      prefill.push_back(report->prefill_tok_s);
      gemm.push_back(report->gemm_ms_per_step);
      step.push_back(report->step_ms);
      exact += report->fidelity_exact_matches;
      prompts += report->fidelity_prompts;
      const RegressionVerdict verdict = IsRegression(*report, expected, config.regression_fraction);
      if (verdict.regression) ++regressions;
      latest_regressed[report->device_id] = verdict.regression;  // sorted by time: the last one wins
      latest_judged[report->device_id] = verdict.judged;
    }
    *cell.mutable_decode_tok_s() = Stats(decode);
    *cell.mutable_prefill_tok_s() = Stats(prefill);
    *cell.mutable_gemm_ms_per_step() = Stats(gemm);
    *cell.mutable_step_ms() = Stats(step);
    cell.set_fidelity_exact_matches(static_cast<uint32_t>(exact));
    cell.set_fidelity_prompts(static_cast<uint32_t>(prompts));
    cell.set_device_count(static_cast<uint32_t>(latest_regressed.size()));
    cell.set_regressions(regressions);
    *cell.mutable_last_measured() = ToTimestamp(reports.back()->measured_at);

    uint32_t healthy_devices = 0;
    for (const auto& [device, regressed] : latest_regressed) {
      if (!regressed) ++healthy_devices;
    }
    uint32_t not_judged = 0;
    for (const auto& [device, judged] : latest_judged) {
      if (!judged) ++not_judged;
    }
    cell.set_not_judged(not_judged);
    // "; 2 not judged": devices no figure of the policy speaks for, told
    // apart from those inside expectations.
    const std::string unjudged_words =
        not_judged == 0 ? std::string() : absl::StrCat(", ", not_judged, " not judged");
    const bool collapsed = FidelityCollapsed(exact, prompts, cell.cpu_model(), expected);
    v1::Verification* verification = cell.mutable_verification();
    verification->set_device_count(healthy_devices);
    if (PolicyVerified(expectations, path, hardware_class)) {
      // The policy's word stands, but the fleet's regressions are shown
      // beside it, not hidden behind it.
      cell.set_verified(true);
      verification->set_source(v1::Verification::SOURCE_POLICY);
      const uint32_t regressed = cell.device_count() - healthy_devices;
      verification->set_reason(absl::StrCat(
          "the policy marks ", path, " as measured on ", hardware_class, "; ", regressed, " of ",
          cell.device_count(), cell.device_count() == 1 ? " device" : " devices", " regressed",
          unjudged_words));
    } else if (collapsed) {
      verification->set_source(v1::Verification::SOURCE_FLEET);
      verification->set_reason(absl::StrCat(
          "measured, not verified: fidelity collapsed (", exact, "/", prompts,
          " exact matches, below half the policy's expected rate)"));
    } else if (healthy_devices >= config.min_devices) {
      cell.set_verified(true);
      verification->set_source(v1::Verification::SOURCE_FLEET);
      verification->set_reason(absl::StrCat(healthy_devices, " ", hardware_class, " devices with ",
                                            cell.cpu_model(), " reported ", path, " within ",
                                            FormatWindow(config.window),
                                            " inside expectations"));
    } else {
      verification->set_source(v1::Verification::SOURCE_FLEET);
      verification->set_reason(absl::StrCat(
          "measured, not verified: ", healthy_devices, " of ", config.min_devices,
          " devices needed reported inside expectations within ", FormatWindow(config.window),
          " (", cell.device_count() - healthy_devices, " regressed", unjudged_words, ")"));
    }
    cells.push_back(std::move(cell));
  }
  return cells;
}

DeviceVerification VerificationForDevice(const std::vector<v1::VerificationCell>& matrix,
                                       const std::vector<PathExpectation>& expectations,
                                       std::string_view path, std::string_view hardware_class,
                                       std::string_view cpu_model) {
  const std::string normalized = policy::NormalizeCpuModel(cpu_model);
  for (const v1::VerificationCell& cell : matrix) {
    if (cell.path() == path && cell.hardware_class() == hardware_class &&
        policy::NormalizeCpuModel(cell.cpu_model()) == normalized) {
      return {cell.verified(), cell.verification()};
    }
  }
  DeviceVerification out;
  v1::Verification& verification = out.verification;
  if (PolicyVerified(expectations, path, hardware_class)) {
    out.verified = true;
    verification.set_source(v1::Verification::SOURCE_POLICY);
    verification.set_reason(absl::StrCat("the policy marks ", std::string(path), " as measured on ", std::string(hardware_class)));
  } else {
    verification.set_source(v1::Verification::SOURCE_NONE);
    verification.set_reason(absl::StrCat("no fleet reports of ", std::string(path), " on ", std::string(hardware_class),
                                         " with this CPU model"));
  }
  return out;
}

void AddPolicyVerifiedCells(const std::vector<PathExpectation>& expectations,
                            std::vector<v1::VerificationCell>* cells) {
  using CellKey = std::tuple<std::string, std::string, std::string>;
  std::set<CellKey> present;
  for (const v1::VerificationCell& cell : *cells) {
    present.insert({cell.path(), cell.hardware_class(), policy::NormalizeCpuModel(cell.cpu_model())});
  }
  // A reported cell whose CPU a figure names through its aliases stands for
  // that figure's CPU: the policy's cell would list the same part twice.
  const auto reported_as_alias = [cells](const PathExpectation& expectation,
                                         const policy::ExpectedFigures& figures) {
    for (const v1::VerificationCell& cell : *cells) {
      if (cell.path() == expectation.path && cell.hardware_class() == expectation.hardware_class &&
          cell.device_count() > 0 &&
          policy::FiguresMatchCpu(figures, policy::NormalizeCpuModel(cell.cpu_model()))) {
        return true;
      }
    }
    return false;
  };
  const size_t reported = cells->size();
  for (const PathExpectation& expectation : expectations) {
    if (!expectation.policy_verified) continue;
    // One cell per CPU model the policy measured the path on; one without a
    // CPU model when its figures name none.
    std::vector<std::string> cpu_models;
    bool names_a_cpu = false;
    for (const policy::ExpectedFigures& figures : expectation.expected) {
      if (figures.cpu_model.empty()) continue;
      names_a_cpu = true;
      if (!reported_as_alias(expectation, figures)) cpu_models.push_back(figures.cpu_model);
    }
    if (!names_a_cpu) cpu_models.push_back("");
    for (const std::string& cpu_model : cpu_models) {
      if (!present.insert({expectation.path, expectation.hardware_class,
                           policy::NormalizeCpuModel(cpu_model)})
               .second) {
        continue;
      }
      v1::VerificationCell cell;
      cell.set_path(expectation.path);
      cell.set_hardware_class(expectation.hardware_class);
      cell.set_cpu_model(cpu_model);
      cell.set_verified(true);
      v1::Verification* verification = cell.mutable_verification();
      verification->set_source(v1::Verification::SOURCE_POLICY);
      verification->set_reason(absl::StrCat(
          "the policy marks ", expectation.path, " as measured on ",
          expectation.hardware_class.empty() ? "every class" : expectation.hardware_class,
          "; no fleet reports"));
      cells->push_back(std::move(cell));
    }
  }
  if (cells->size() == reported) return;
  const auto key = [](const v1::VerificationCell& cell) {
    return std::make_tuple(cell.path(), cell.hardware_class(),
                           policy::NormalizeCpuModel(cell.cpu_model()));
  };
  std::sort(cells->begin(), cells->end(),
            [&key](const v1::VerificationCell& a, const v1::VerificationCell& b) {
              return key(a) < key(b);
            });
}

}  // namespace weightpath::store
