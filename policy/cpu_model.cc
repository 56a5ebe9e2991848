#include "policy/cpu_model.h"

#include <cctype>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace weightpath::policy {
namespace {

// "3.20ghz", "2400mhz": a clock written without the "@".
bool IsClock(std::string_view word) {
  for (std::string_view unit : {"ghz", "mhz"}) {
    if (word.size() <= unit.size() || word.substr(word.size() - unit.size()) != unit) continue;
    const std::string_view number = word.substr(0, word.size() - unit.size());
    bool digit = false;
    for (char c : number) {
      if (std::isdigit(static_cast<unsigned char>(c))) {
        digit = true;
      } else if (c != '.') {
        return false;
      }
    }
    return digit;
  }
  return false;
}

}  // namespace

std::string NormalizeCpuModel(std::string_view cpu_model) {
  std::string lowered;
  lowered.reserve(cpu_model.size());
  for (char c : cpu_model) lowered.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  // The clock suffix ("@ 2.00GHz") varies between steppings of one model.
  const size_t at = lowered.find('@');
  if (at != std::string::npos) lowered.resize(at);
  for (std::string_view mark : {"(r)", "(tm)"}) {
    size_t position;
    while ((position = lowered.find(mark)) != std::string::npos) lowered.replace(position, mark.size(), " ");
  }
  std::vector<absl::string_view> words;
  for (absl::string_view word : absl::StrSplit(lowered, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    if (word == "cpu" || word == "processor") continue;
    words.push_back(word);
  }
  while (!words.empty() && IsClock(std::string_view(words.back().data(), words.back().size()))) {
    words.pop_back();
  }
  return absl::StrJoin(words, " ");
}

bool CpuModelGlobMatches(std::string_view glob, std::string_view name) {
  // The classic linear-backtracking match: on a mismatch, the last '*'
  // takes one more character. O(|glob| x |name|) at worst; both are short
  // (the policy bounds an alias at 256 bytes, a device's name at its
  // request's string bound).
  size_t g = 0, n = 0;
  size_t star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star = g++;
      resume = n;
    } else if (g < glob.size() && glob[g] == name[n]) {
      ++g;
      ++n;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

bool FiguresMatchCpu(const ExpectedFigures& figures, std::string_view normalized_cpu) {
  if (NormalizeCpuModel(figures.cpu_model) == normalized_cpu) return true;
  for (const std::string& alias : figures.cpu_model_aliases) {
    const std::string normalized = NormalizeCpuModel(alias);
    if (normalized.find('*') != std::string::npos ? CpuModelGlobMatches(normalized, normalized_cpu)
                                                  : normalized == normalized_cpu) {
      return true;
    }
  }
  return false;
}

}  // namespace weightpath::policy
