#include "agent/agent_config.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/local_file.h"
#include "common/bounded_yaml.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::agent {
namespace {

constexpr size_t kMaxConfigBytes = 1024 * 1024;
constexpr size_t kMaxConfigNodes = 10000;

// Errors point at the line of the offending node, so an operator with a
// fleet of config files can fix the right one without guessing.
class ConfigReader {
 public:
  explicit ConfigReader(absl::string_view source_name) : source_name_(source_name) {}

  // Keys and messages quote the file's own text: escaped, a newline in it
  // cannot forge a line of the agent's log.
  absl::Status Error(const YAML::Node& node, absl::string_view key, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_name_, ":", node.Mark().line + 1, ": ",
                                                   ControlEscaped(key), ": ",
                                                   ControlEscaped(what)));
  }

  absl::StatusOr<std::string> String(const YAML::Node& node, absl::string_view key) const {
    if (!node.IsScalar()) return Error(node, key, "must be a string");
    return node.Scalar();
  }

  absl::StatusOr<std::string> NonEmptyString(const YAML::Node& node, absl::string_view key) const {
    ASSIGN_OR_RETURN(std::string value, String(node, key));
    if (value.empty()) return Error(node, key, "must not be empty");
    return value;
  }

  // A positive duration: a number of seconds (0.5) or a unit string ("500ms").
  absl::StatusOr<absl::Duration> PositiveDuration(const YAML::Node& node,
                                                  absl::string_view key) const {
    if (!node.IsScalar()) return Error(node, key, "must be a number of seconds or e.g. \"500ms\"");
    const std::string& text = node.Scalar();
    double seconds = 0;
    absl::Duration duration;
    if (absl::SimpleAtod(text, &seconds)) {
      duration = absl::Seconds(seconds);
    } else if (!absl::ParseDuration(text, &duration)) {
      return Error(node, key,
                   absl::StrCat("'", text, "' is not a number of seconds or a duration like 500ms"));
    }
    if (duration <= absl::ZeroDuration() || duration == absl::InfiniteDuration()) {
      return Error(node, key, absl::StrCat("must be positive and finite, got '", text, "'"));
    }
    return duration;
  }

  absl::Status RejectUnknownKeys(const YAML::Node& map, absl::string_view where,
                                 const std::set<std::string>& known) const {
    for (const auto& entry : map) {
      const std::string key = entry.first.Scalar();
      if (known.count(key) == 0) {
        return Error(entry.first, absl::StrCat(where, key),
                     absl::StrCat("unknown key (known: ", absl::StrJoin(known, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string source_name_;
};

absl::StatusOr<v1::Priority> ParsePriority(const ConfigReader& reader, const YAML::Node& node) {
  ASSIGN_OR_RETURN(std::string text, reader.String(node, "priority"));
  const std::string lowered = absl::AsciiStrToLower(text);
  if (lowered == "speed") return v1::PRIORITY_SPEED;
  if (lowered == "fidelity") return v1::PRIORITY_FIDELITY;
  return reader.Error(node, "priority",
                      absl::StrCat("must be speed or fidelity, got '", text, "'"));
}

absl::StatusOr<TlsFiles> ParseTls(const ConfigReader& reader, const YAML::Node& node) {
  if (!node.IsMap()) return reader.Error(node, "tls", "must be a map with ca, cert, key");
  RETURN_IF_ERROR(reader.RejectUnknownKeys(node, "tls.", {"ca", "cert", "key"}));
  TlsFiles tls;
  if (node["ca"]) { ASSIGN_OR_RETURN(tls.ca, reader.NonEmptyString(node["ca"], "tls.ca")); }
  if (node["cert"]) { ASSIGN_OR_RETURN(tls.cert, reader.NonEmptyString(node["cert"], "tls.cert")); }
  if (node["key"]) { ASSIGN_OR_RETURN(tls.key, reader.NonEmptyString(node["key"], "tls.key")); }
  if (tls.cert.empty() != tls.key.empty()) {
    return reader.Error(node, tls.cert.empty() ? "tls.cert" : "tls.key",
                        "tls.cert and tls.key must be given together (mutual TLS) or not at all");
  }
  return tls;
}

absl::Status ParseLabels(const ConfigReader& reader, const YAML::Node& node,
                         google::protobuf::Map<std::string, std::string>* labels) {
  if (!node.IsMap()) return reader.Error(node, "labels", "must be a map of string to string");
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (key.empty()) return reader.Error(entry.first, "labels", "a label name must not be empty");
    ASSIGN_OR_RETURN((*labels)[key], reader.String(entry.second, absl::StrCat("labels.", key)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadMachineId(absl::string_view root) {
  const std::string path = absl::StrCat(root, root.empty() || root.back() != '/' ? "/" : "",
                                        "etc/machine-id");
  // 32 hex digits and a newline; the limit only keeps a wrong file cheap.
  constexpr size_t kMaxMachineIdBytes = 4096;
  absl::StatusOr<std::string> contents = ReadLocalFile(path, "machine id", kMaxMachineIdBytes);
  if (!contents.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("device_id: not set in the config: ", contents.status().message()));
  }
  std::string id(absl::StripAsciiWhitespace(*contents));
  if (id.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("device_id: not set in the config and ", path, " is empty"));
  }
  return id;
}

}  // namespace

absl::StatusOr<AgentConfig> ParseAgentConfig(absl::string_view yaml_text,
                                             absl::string_view source_name, absl::string_view root) {
  const ConfigReader reader(source_name);
  // A config is a few dozen keys; aliases count as what they repeat, so a
  // config cannot expand into more than these on a small device.
  yaml::Limits limits;
  limits.max_bytes = kMaxConfigBytes;
  limits.max_nodes = kMaxConfigNodes;
  ASSIGN_OR_RETURN(const YAML::Node document, yaml::LoadBounded(yaml_text, source_name, limits));
  if (!document.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ":1: the config must be a YAML map (server, state_dir, ...)"));
  }
  RETURN_IF_ERROR(reader.RejectUnknownKeys(
      document, "",
      {"server", "tls", "device_id", "model", "priority", "labels", "state_dir", "cache_dir",
       "decision_file", "env_file", "budget", "call_timeout", "retry_base_delay",
       "retry_max_delay", "apply_command", "engine_check_command", "resolve_interval", "trust"}));

  AgentConfig config;
  if (!document["server"]) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ":1: server: required (host:port of weightpath-server)"));
  }
  ASSIGN_OR_RETURN(config.server, reader.NonEmptyString(document["server"], "server"));
  if (document["tls"]) { ASSIGN_OR_RETURN(config.tls, ParseTls(reader, document["tls"])); }
  if (document["device_id"]) {
    ASSIGN_OR_RETURN(config.device_id, reader.NonEmptyString(document["device_id"], "device_id"));
  }
  if (document["model"]) { ASSIGN_OR_RETURN(config.model, reader.String(document["model"], "model")); }
  if (document["priority"]) {
    ASSIGN_OR_RETURN(config.priority, ParsePriority(reader, document["priority"]));
  }
  if (document["labels"]) RETURN_IF_ERROR(ParseLabels(reader, document["labels"], &config.labels));
  if (document["trust"]) {
    ASSIGN_OR_RETURN(config.trust, ParseTrustConfig(document["trust"], source_name));
  }
  struct PathKey {
    const char* key;
    std::string* value;
  };
  if (document["apply_command"]) {
    ASSIGN_OR_RETURN(config.apply_command,
                     reader.NonEmptyString(document["apply_command"], "apply_command"));
  }
  if (document["engine_check_command"]) {
    ASSIGN_OR_RETURN(config.engine_check_command,
                     reader.NonEmptyString(document["engine_check_command"], "engine_check_command"));
  }
  for (const PathKey& path : {PathKey{"state_dir", &config.state_dir},
                              PathKey{"cache_dir", &config.cache_dir},
                              PathKey{"decision_file", &config.decision_file},
                              PathKey{"env_file", &config.env_file}}) {
    if (document[path.key]) {
      ASSIGN_OR_RETURN(*path.value, reader.NonEmptyString(document[path.key], path.key));
    }
  }
  struct DurationKey {
    const char* key;
    absl::Duration* value;
  };
  for (const DurationKey& duration : {DurationKey{"budget", &config.budget},
                                      DurationKey{"call_timeout", &config.call_timeout},
                                      DurationKey{"retry_base_delay", &config.retry_base_delay},
                                      DurationKey{"retry_max_delay", &config.retry_max_delay},
                                      DurationKey{"resolve_interval", &config.resolve_interval}}) {
    if (document[duration.key]) {
      ASSIGN_OR_RETURN(*duration.value,
                       reader.PositiveDuration(document[duration.key], duration.key));
    }
  }
  if (config.retry_base_delay > config.retry_max_delay) {
    const char* key = document["retry_base_delay"] ? "retry_base_delay" : "retry_max_delay";
    return reader.Error(document[key], key, "retry_base_delay must not exceed retry_max_delay");
  }
  if (config.device_id.empty()) { ASSIGN_OR_RETURN(config.device_id, ReadMachineId(root)); }
  return config;
}

absl::StatusOr<AgentConfig> LoadAgentConfig(const std::string& path, absl::string_view root) {
  // Bounded and type-checked: a config path naming a FIFO or /dev/zero is
  // an error naming it, not a hang or an abort at boot.
  absl::StatusOr<std::string> contents = ReadLocalFile(path, "config file");
  if (!contents.ok()) {
    if (absl::IsInvalidArgument(contents.status())) return contents.status();
    return absl::NotFoundError(contents.status().message());
  }
  return ParseAgentConfig(*contents, path, root);
}

}  // namespace weightpath::agent
