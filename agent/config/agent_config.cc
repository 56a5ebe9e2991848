#include "agent/config/agent_config.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/base/local_file.h"
#include "common/bounded_yaml.h"
#include "common/control_characters.h"
#include "common/strict_yaml.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::agent {
namespace {

constexpr size_t kMaxConfigBytes = 1024 * 1024;
constexpr size_t kMaxConfigNodes = 10000;

// The keys of an agent config, as an unknown one's refusal lists them.
constexpr absl::string_view kConfigKeys[] = {
    "apply_command", "artifact_mirrors", "budget", "cache_dir", "cache_max_bytes", "cache_min_free_bytes",
    "cache_reserve_bytes", "call_timeout", "decision_file", "device_id",
    "engine_check_command", "env_file", "labels", "max_download_rate",
    "max_resolve_interval", "min_resolve_interval", "mirror_stall_timeout", "model", "parallel_downloads", "priority",
    "resolve_interval", "retry_base_delay", "retry_max_delay", "server", "state_dir", "tls",
    "trust"};

absl::StatusOr<v1::Priority> ParsePriority(const yaml::Reader& reader, const yaml::Entry& entry) {
  ASSIGN_OR_RETURN(std::string text, yaml::ReadString(reader, entry));
  const std::string lowered = absl::AsciiStrToLower(text);
  if (lowered == "speed") return v1::PRIORITY_SPEED;
  if (lowered == "fidelity") return v1::PRIORITY_FIDELITY;
  return yaml::Fault(reader, entry, absl::StrCat("must be speed or fidelity, got '", text, "'"));
}

absl::StatusOr<TlsFiles> ParseTls(const yaml::Reader& reader, const yaml::Entry& entry) {
  ASSIGN_OR_RETURN(const yaml::Map map, yaml::Map::Read(reader, entry, {"ca", "cert", "key"}));
  TlsFiles tls;
  for (const auto& [key, value] : {std::pair<const char*, std::string*>{"ca", &tls.ca},
                                   {"cert", &tls.cert}, {"key", &tls.key}}) {
    if (const yaml::Entry* file = map.Find(key)) {
      ASSIGN_OR_RETURN(*value, yaml::ReadNonEmptyString(reader, *file));
    }
  }
  if (tls.cert.empty() != tls.key.empty()) {
    return reader.Fault(map.node(), tls.cert.empty() ? "tls.cert" : "tls.key",
                        "tls.cert and tls.key must be given together (mutual TLS) or not at all");
  }
  return tls;
}

absl::Status ParseLabels(const yaml::Reader& reader, const yaml::Entry& entry,
                         google::protobuf::Map<std::string, std::string>* labels) {
  if (!entry.value.IsMap()) return yaml::Fault(reader, entry, "must be a map of string to string");
  ASSIGN_OR_RETURN(const yaml::Map map, yaml::Map::ReadAnyKeys(reader, entry));
  for (const yaml::Entry& label : map.entries()) {
    if (label.key.empty()) {
      return reader.FaultAt(label.key_mark, "labels", "a label name must not be empty");
    }
    ASSIGN_OR_RETURN((*labels)[label.key], yaml::ReadString(reader, label));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ParseMirrors(const yaml::Reader& reader,
                                                      const yaml::Entry& entry) {
  ASSIGN_OR_RETURN(const std::vector<yaml::Entry> items,
                   yaml::ReadList(reader, entry, "a list of http:// or https:// base URLs"));
  if (items.size() > kMaxArtifactMirrors) {
    return yaml::Fault(reader, entry,
                       absl::StrCat("at most ", kMaxArtifactMirrors, " mirrors, got ", items.size()));
  }
  std::vector<std::string> mirrors;
  for (const yaml::Entry& item : items) {
    ASSIGN_OR_RETURN(const std::string url, yaml::ReadNonEmptyString(reader, item));
    absl::StatusOr<std::string> base = ValidateBlobBaseUrl(url);
    if (!base.ok()) return yaml::Fault(reader, item, base.status().message());
    mirrors.push_back(*std::move(base));
  }
  return mirrors;
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

absl::StatusOr<std::string> ValidateBlobBaseUrl(absl::string_view url) {
  if (url.size() > kMaxMirrorUrlBytes) {
    return absl::InvalidArgumentError(absl::StrCat("longer than ", kMaxMirrorUrlBytes, " bytes"));
  }
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://") && !absl::ConsumePrefix(&rest, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat("'", ControlEscaped(std::string(url)),
                                                   "' must start with http:// or https://"));
  }
  const absl::string_view authority = rest.substr(0, rest.find('/'));
  if (authority.empty() || absl::StrContains(authority, '@')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", ControlEscaped(std::string(url)), "' needs a host and no user information (user@)"));
  }
  for (const char c : url) {
    if (c == '?' || c == '#' || static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", ControlEscaped(std::string(url)),
          "' must not hold a query, a fragment, whitespace or control bytes "
          "(/blobs/sha256/<hex> is appended to it)"));
    }
  }
  std::string base(url);
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base;
}

absl::StatusOr<AgentConfig> ParseAgentConfig(absl::string_view yaml_text,
                                             absl::string_view source_name, absl::string_view root) {
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
  const yaml::Reader reader(source_name);
  ASSIGN_OR_RETURN(const yaml::Map map, yaml::Map::Read(reader, document, "", kConfigKeys));

  AgentConfig config;
  ASSIGN_OR_RETURN(const yaml::Entry* server,
                   map.Require("server", "required (host:port of weightpath-server)"));
  ASSIGN_OR_RETURN(config.server, yaml::ReadNonEmptyString(reader, *server));
  if (const yaml::Entry* tls = map.Find("tls")) {
    ASSIGN_OR_RETURN(config.tls, ParseTls(reader, *tls));
  }
  if (const yaml::Entry* device_id = map.Find("device_id")) {
    ASSIGN_OR_RETURN(config.device_id, yaml::ReadNonEmptyString(reader, *device_id));
  }
  if (const yaml::Entry* model = map.Find("model")) {
    ASSIGN_OR_RETURN(config.model, yaml::ReadString(reader, *model));
  }
  if (const yaml::Entry* priority = map.Find("priority")) {
    ASSIGN_OR_RETURN(config.priority, ParsePriority(reader, *priority));
  }
  if (const yaml::Entry* labels = map.Find("labels")) {
    RETURN_IF_ERROR(ParseLabels(reader, *labels, &config.labels));
  }
  if (const yaml::Entry* mirrors = map.Find("artifact_mirrors")) {
    ASSIGN_OR_RETURN(config.artifact_mirrors, ParseMirrors(reader, *mirrors));
  }
  if (const yaml::Entry* trust = map.Find("trust")) {
    ASSIGN_OR_RETURN(config.trust, ParseTrustConfig(reader, *trust));
  }
  for (const auto& [key, value] :
       {std::pair<const char*, std::string*>{"apply_command", &config.apply_command},
        {"engine_check_command", &config.engine_check_command},
        {"state_dir", &config.state_dir},
        {"cache_dir", &config.cache_dir},
        {"decision_file", &config.decision_file},
        {"env_file", &config.env_file}}) {
    if (const yaml::Entry* entry = map.Find(key)) {
      ASSIGN_OR_RETURN(*value, yaml::ReadNonEmptyString(reader, *entry));
    }
  }
  for (const auto& [key, value] :
       {std::pair<const char*, absl::Duration*>{"budget", &config.budget},
        {"call_timeout", &config.call_timeout},
        {"retry_base_delay", &config.retry_base_delay},
        {"retry_max_delay", &config.retry_max_delay},
        {"resolve_interval", &config.resolve_interval},
        {"min_resolve_interval", &config.min_resolve_interval},
        {"max_resolve_interval", &config.max_resolve_interval},
        {"mirror_stall_timeout", &config.mirror_stall_timeout}}) {
    if (const yaml::Entry* entry = map.Find(key)) {
      ASSIGN_OR_RETURN(*value, yaml::ReadPositiveDuration(reader, *entry));
    }
  }
  if (const yaml::Entry* stall = map.Find("mirror_stall_timeout");
      stall != nullptr && config.mirror_stall_timeout < absl::Seconds(1)) {
    return yaml::Fault(reader, *stall,
                       "must be at least 1s (the low-speed check counts whole seconds)");
  }
  // cache_reserve_bytes is the older name of cache_min_free_bytes: a config
  // written before it still boots, and one naming both is ambiguous.
  const yaml::Entry* min_free = map.Find("cache_min_free_bytes");
  if (const yaml::Entry* reserve = map.Find("cache_reserve_bytes")) {
    if (min_free != nullptr) {
      return yaml::Fault(reader, *reserve,
                         "cache_reserve_bytes is the older name of cache_min_free_bytes; give "
                         "one of them");
    }
    min_free = reserve;
  }
  if (min_free != nullptr) {
    ASSIGN_OR_RETURN(const int64_t bytes, yaml::ReadInt64(reader, *min_free, 0, int64_t{1} << 50));
    config.cache_reserve_bytes = static_cast<uint64_t>(bytes);
  }
  if (const yaml::Entry* max_bytes = map.Find("cache_max_bytes")) {
    ASSIGN_OR_RETURN(const int64_t bytes, yaml::ReadInt64(reader, *max_bytes, 0, int64_t{1} << 50));
    config.cache_max_bytes = static_cast<uint64_t>(bytes);
  }
  if (const yaml::Entry* parallel = map.Find("parallel_downloads")) {
    ASSIGN_OR_RETURN(const int64_t count, yaml::ReadInt64(reader, *parallel, 1, 16));
    config.parallel_downloads = static_cast<int>(count);
  }
  if (const yaml::Entry* rate = map.Find("max_download_rate")) {
    ASSIGN_OR_RETURN(const int64_t bytes, yaml::ReadInt64(reader, *rate, 0, int64_t{1} << 40));
    config.max_download_rate = static_cast<uint64_t>(bytes);
  }
  if (config.retry_base_delay > config.retry_max_delay) {
    const yaml::Entry* given = map.Find("retry_base_delay");
    if (given == nullptr) given = map.Find("retry_max_delay");
    return yaml::Fault(reader, *given, "retry_base_delay must not exceed retry_max_delay");
  }
  if (config.min_resolve_interval > config.max_resolve_interval) {
    const yaml::Entry* given = map.Find("min_resolve_interval");
    if (given == nullptr) given = map.Find("max_resolve_interval");
    return yaml::Fault(reader, *given, "min_resolve_interval must not exceed max_resolve_interval");
  }
  if (const yaml::Entry* given = map.Find("resolve_interval")) {
    const bool outside = config.resolve_interval < config.min_resolve_interval ||
                         config.resolve_interval > config.max_resolve_interval;
    if (outside && map.Find("min_resolve_interval") == nullptr &&
        map.Find("max_resolve_interval") == nullptr) {
      // A config written before the bounds existed (resolve_interval: 10s, or
      // 48h) must still boot: the operator's own interval widens the default
      // bounds, which are there to hold the server's suggestion in check.
      config.min_resolve_interval = std::min(config.min_resolve_interval, config.resolve_interval);
      config.max_resolve_interval = std::max(config.max_resolve_interval, config.resolve_interval);
    } else if (outside) {
      return yaml::Fault(reader, *given,
                         absl::StrCat("must lie between min_resolve_interval (",
                                      absl::FormatDuration(config.min_resolve_interval),
                                      ") and max_resolve_interval (",
                                      absl::FormatDuration(config.max_resolve_interval), ")"));
    }
  } else {
    // The default follows bounds set without it.
    config.resolve_interval = std::clamp(config.resolve_interval, config.min_resolve_interval,
                                         config.max_resolve_interval);
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
