#include "server/observability/logging.h"

#include <memory>
#include <string>

#include "common/control_characters.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {
namespace {

// %* in the pattern: the message, escaped so every line stays valid JSON
// whatever a file name or an error message contains.
class JsonMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string escaped;
    AppendJsonEscaped(absl::string_view(msg.payload.data(), msg.payload.size()), &escaped);
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

// %* in the text pattern: the message with control characters escaped. A
// message quotes what devices and files send (device_id, profile.arch,
// label keys, model, a YAML error); a newline among them would otherwise end
// the line and let the rest pass for a line of the server's own.
class TextMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const absl::string_view payload(msg.payload.data(), msg.payload.size());
    if (!HasControlCharacters(payload)) {
      dest.append(payload.data(), payload.data() + payload.size());
      return;
    }
    std::string escaped;
    AppendControlEscaped(payload, &escaped);
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<TextMessageFlag>();
  }
};

}  // namespace

void AppendJsonEscaped(absl::string_view text, std::string* out) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  for (char c : text) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out->append("\\u00");
          out->push_back(kHexDigits[(c >> 4) & 0xf]);
          out->push_back(kHexDigits[c & 0xf]);
        } else {
          out->push_back(c);
        }
    }
  }
}

void ConfigureLogging(LogFormat format, absl::string_view level) {
  auto logger = std::make_shared<spdlog::logger>(
      "weightpath-server", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (format == LogFormat::kJson) {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonMessageFlag>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n","msg":"%*"})");
    logger->set_formatter(std::move(formatter));
  } else {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<TextMessageFlag>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%f %L %*");
    logger->set_formatter(std::move(formatter));
  }
  logger->set_level(spdlog::level::from_str(std::string(level)));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace weightpath::server
