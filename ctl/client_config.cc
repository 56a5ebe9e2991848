#include "ctl/client_config.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bounded_yaml.h"
#include "common/control_characters.h"
#include "ctl/text_file.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::ctl {
namespace {

// A config file of a few paths: anything near these limits is not one.
constexpr size_t kMaxConfigBytes = 64 * 1024;
constexpr size_t kMaxConfigNodes = 256;

struct ConfigFile {
  std::optional<SourcedValue> server;
  std::optional<SourcedValue> token_file;
  std::optional<SourcedValue> ca;
  std::optional<SourcedValue> cert;
  std::optional<SourcedValue> key;
};

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status KeyError(const std::string& path, const YAML::Node& key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", key.Mark().line + 1, ": ",
                                                 ControlEscaped(key.Scalar()), ": ", what));
}

// `value` as a string: a scalar, never empty.
absl::StatusOr<SourcedValue> StringValue(const std::string& path, const YAML::Node& key,
                                         const YAML::Node& value, bool is_path,
                                         absl::string_view name) {
  if (!value.IsScalar() || value.Scalar().empty()) {
    return KeyError(path, key, "must be a non-empty string");
  }
  SourcedValue sourced;
  sourced.value = value.Scalar();
  if (is_path && sourced.value.front() != '/') {
    sourced.value = absl::StrCat(DirectoryOf(path), "/", sourced.value);
  }
  sourced.source = absl::StrCat(path, ":", key.Mark().line + 1, " ", name);
  return sourced;
}

absl::StatusOr<ConfigFile> ReadConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  yaml::Limits limits;
  limits.max_bytes = kMaxConfigBytes;
  limits.max_nodes = kMaxConfigNodes;
  limits.max_depth = 4;
  absl::StatusOr<YAML::Node> root = yaml::LoadBounded(*text, path, limits);
  if (!root.ok()) return root.status();
  ConfigFile config;
  if (root->IsNull()) return config;
  if (!root->IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": must be a mapping (server, token_file, tls)"));
  }
  for (const auto& entry : *root) {
    const std::string& name = entry.first.Scalar();
    if (name == "server" || name == "token_file") {
      absl::StatusOr<SourcedValue> value =
          StringValue(path, entry.first, entry.second, name == "token_file", name);
      if (!value.ok()) return value.status();
      (name == "server" ? config.server : config.token_file) = *std::move(value);
    } else if (name == "tls") {
      if (!entry.second.IsMap()) {
        return KeyError(path, entry.first, "must be a mapping of ca, cert and key");
      }
      for (const auto& tls : entry.second) {
        const std::string& tls_name = tls.first.Scalar();
        std::optional<SourcedValue>* slot = tls_name == "ca"     ? &config.ca
                                            : tls_name == "cert" ? &config.cert
                                            : tls_name == "key"  ? &config.key
                                                                 : nullptr;
        if (slot == nullptr) {
          return KeyError(path, tls.first, "unknown key under tls (ca, cert or key)");
        }
        absl::StatusOr<SourcedValue> value =
            StringValue(path, tls.first, tls.second, true, absl::StrCat("tls.", tls_name));
        if (!value.ok()) return value.status();
        *slot = *std::move(value);
      }
    } else {
      return KeyError(path, entry.first, "unknown key (server, token_file or tls)");
    }
  }
  return config;
}

// The config file's path and whether it must exist.
std::optional<std::pair<std::string, bool>> ConfigPath(const Environment& environment) {
  if (std::optional<std::string> named = environment("WEIGHTPATH_CONFIG"); named && !named->empty()) {
    return std::make_pair(*named, true);
  }
  if (std::optional<std::string> home = environment("HOME"); home && !home->empty()) {
    return std::make_pair(absl::StrCat(*home, "/.config/weightpath/config.yaml"), false);
  }
  return std::nullopt;
}

std::optional<SourcedValue> FromFlag(const ParsedArguments& arguments, const std::string& flag) {
  std::optional<std::string> value = arguments.Value(flag);
  if (!value) return std::nullopt;
  return SourcedValue{*value, absl::StrCat("--", flag)};
}

std::optional<SourcedValue> FromEnvironment(const Environment& environment, const std::string& name) {
  std::optional<std::string> value = environment(name);
  if (!value || value->empty()) return std::nullopt;
  return SourcedValue{*value, name};
}

template <typename... Candidates>
std::optional<SourcedValue> First(std::optional<SourcedValue> first, Candidates... rest) {
  if (first) return first;
  if constexpr (sizeof...(rest) > 0) {
    return First(std::move(rest)...);
  } else {
    return std::nullopt;
  }
}

}  // namespace

Environment ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

absl::StatusOr<ClientSettings> ResolveClientSettings(const ParsedArguments& arguments,
                                                     const Environment& environment) {
  ConfigFile file;
  if (std::optional<std::pair<std::string, bool>> path = ConfigPath(environment)) {
    absl::StatusOr<ConfigFile> read = ReadConfigFile(path->first);
    if (read.ok()) {
      file = *std::move(read);
    } else if (path->second || !absl::IsNotFound(read.status())) {
      return absl::Status(read.status().code(),
                          absl::StrCat(path->second ? "WEIGHTPATH_CONFIG: " : "config file: ",
                                       read.status().message()));
    }
  }
  ClientSettings settings;
  settings.server =
      First(FromFlag(arguments, "server"), FromEnvironment(environment, "WEIGHTPATH_SERVER"),
            file.server)
          .value_or(SourcedValue{kDefaultServer, "default"});
  if (settings.server.value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(settings.server.source, ": the server address is empty (HOST:PORT)"));
  }
  settings.token_file = First(FromFlag(arguments, "token-file"),
                              FromEnvironment(environment, "WEIGHTPATH_TOKEN_FILE"), file.token_file);
  // TLS files come as a set from one place: a --ca flag with a config
  // file's client certificate would mix two operators' setups.
  if (arguments.Has("ca") || arguments.Has("cert") || arguments.Has("key")) {
    settings.ca = FromFlag(arguments, "ca");
    settings.cert = FromFlag(arguments, "cert");
    settings.key = FromFlag(arguments, "key");
  } else {
    settings.ca = file.ca;
    settings.cert = file.cert;
    settings.key = file.key;
  }
  return settings;
}

}  // namespace weightpath::ctl
