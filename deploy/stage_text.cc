#include "deploy/stage_text.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace weightpath::deploy {

std::string StageOf(uint32_t index, int count) {
  return absl::StrCat("stage ", static_cast<uint64_t>(index) + 1, " of ", count);
}

std::string FormatSeconds(absl::Duration duration) {
  int64_t seconds = std::llround(absl::ToDoubleSeconds(duration));
  const bool negative = seconds < 0;
  if (negative) seconds = -seconds;
  std::string text;
  if (seconds >= 3600) absl::StrAppend(&text, seconds / 3600, "h ");
  if (seconds >= 60) absl::StrAppend(&text, (seconds % 3600) / 60, "m ");
  absl::StrAppend(&text, seconds % 60, "s");
  return negative ? absl::StrCat("-", text) : text;
}

}  // namespace weightpath::deploy
