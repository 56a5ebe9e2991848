#include "agent/engine/shell_quote.h"

#include "absl/strings/ascii.h"

namespace weightpath::agent {
namespace {

bool IsShellSafe(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  switch (c) {
    case '_': case '-': case '.': case '/': case ':': case ',': case '+': case '@': case '%':
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string ShellQuote(absl::string_view text) {
  bool safe = !text.empty();
  for (char c : text) safe = safe && IsShellSafe(c);
  if (safe) return std::string(text);
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  quoted += "'";
  return quoted;
}

std::string EnvFileQuote(absl::string_view text) {
  if (text.find('\'') == absl::string_view::npos) return ShellQuote(text);
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '\\' || c == '"' || c == '$' || c == '`') quoted += '\\';
    quoted += c;
  }
  quoted += "\"";
  return quoted;
}

}  // namespace weightpath::agent
