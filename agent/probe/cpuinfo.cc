#include "agent/probe/cpuinfo.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace weightpath::probe {
namespace {

absl::Status BadField(size_t line_number, absl::string_view key, absl::string_view value,
                      absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("cpuinfo line ", line_number, ": field '", key,
                                                 "' has value '", value, "', expected ",
                                                 expected));
}

absl::StatusOr<uint32_t> ParseDecimal(size_t line_number, absl::string_view key,
                                      absl::string_view value) {
  uint32_t number = 0;
  if (!absl::SimpleAtoi(value, &number)) {
    return BadField(line_number, key, value, "a decimal number");
  }
  return number;
}

absl::StatusOr<uint32_t> ParseHex(size_t line_number, absl::string_view key,
                                  absl::string_view value) {
  uint32_t number = 0;
  absl::string_view digits = value;
  if (absl::StartsWith(digits, "0x") || absl::StartsWith(digits, "0X")) digits.remove_prefix(2);
  if (digits.empty() || !absl::SimpleHexAtoi(digits, &number)) {
    return BadField(line_number, key, value, "a hexadecimal number such as 0x41");
  }
  return number;
}

std::vector<std::string> SplitWords(absl::string_view value) {
  std::vector<std::string> words;
  for (absl::string_view word : absl::StrSplit(value, ' ', absl::SkipWhitespace())) {
    words.emplace_back(absl::StripAsciiWhitespace(word));
  }
  return words;
}

}  // namespace

absl::StatusOr<CpuInfo> ParseCpuInfo(absl::string_view text) {
  CpuInfo cpuinfo;
  CpuInfoProcessor* current = nullptr;
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;  // blank separators and odd lines
    const absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));

    if (key == "processor") {
      // Old 32-bit ARM kernels print "Processor : ARMv7 ..." (capitalised)
      // as a machine-wide line; only the lowercase key opens a stanza.
      auto index = ParseDecimal(line_number, key, value);
      if (!index.ok()) return index.status();
      cpuinfo.processors.emplace_back();
      current = &cpuinfo.processors.back();
      current->index = *index;
      continue;
    }
    if (key == "Hardware") {
      cpuinfo.hardware = std::string(value);
      continue;
    }
    if (key == "Model" && current != nullptr && !value.empty()) {
      cpuinfo.board_model = std::string(value);
      continue;
    }
    if (current == nullptr) continue;

    if (key == "model name") {
      current->model_name = std::string(value);
    } else if (key == "vendor_id") {
      cpuinfo.arch_hint = "x86_64";
    } else if (key == "flags") {
      cpuinfo.arch_hint = "x86_64";
      current->flags = SplitWords(value);
    } else if (key == "Features") {
      cpuinfo.flags_are_arm = true;
      current->flags = SplitWords(value);
    } else if (key == "CPU implementer") {
      auto implementer = ParseHex(line_number, key, value);
      if (!implementer.ok()) return implementer.status();
      current->arm_implementer = *implementer;
    } else if (key == "CPU part") {
      auto part = ParseHex(line_number, key, value);
      if (!part.ok()) return part.status();
      current->arm_part = *part;
    } else if (key == "CPU architecture") {
      // arm64 kernels print 8 for every ARMv8/v9 core; 32-bit ones print 7.
      if (value == "8" || value == "AArch64") {
        cpuinfo.arch_hint = "aarch64";
      } else if (value == "7") {
        cpuinfo.arch_hint = "armv7l";
      }
    } else if (key == "physical id") {
      auto physical_id = ParseDecimal(line_number, key, value);
      if (!physical_id.ok()) return physical_id.status();
      current->physical_id = *physical_id;
    } else if (key == "core id") {
      auto core_id = ParseDecimal(line_number, key, value);
      if (!core_id.ok()) return core_id.status();
      current->core_id = *core_id;
    }
  }
  if (cpuinfo.processors.empty()) {
    return absl::InvalidArgumentError("cpuinfo: no 'processor' line, so no CPU was described");
  }
  return cpuinfo;
}

std::vector<std::string> CommonRawFlags(const CpuInfo& cpuinfo) {
  std::vector<std::string> common;
  bool first = true;
  for (const CpuInfoProcessor& processor : cpuinfo.processors) {
    if (first) {
      common = processor.flags;
      first = false;
      continue;
    }
    const std::set<std::string> present(processor.flags.begin(), processor.flags.end());
    common.erase(std::remove_if(common.begin(), common.end(),
                                [&](const std::string& flag) { return !present.count(flag); }),
                 common.end());
  }
  return common;
}

}  // namespace weightpath::probe
