#include "ctl/client_config.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bounded_yaml.h"
#include "common/strict_yaml.h"
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
  std::optional<SourcedValue> server_name;
};

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The entry's value as a string, never empty; a relative path is taken from
// the config file's folder.
absl::StatusOr<SourcedValue> StringValue(const yaml::Reader& reader, const yaml::Entry& entry,
                                         bool is_path) {
  absl::StatusOr<std::string> value = yaml::ReadScalar(reader, entry, "a non-empty string");
  if (!value.ok()) return value.status();
  if (value->empty()) return yaml::Fault(reader, entry, "must not be empty");
  const std::string path(reader.source_name());
  SourcedValue sourced;
  sourced.value = *std::move(value);
  if (is_path && sourced.value.front() != '/') {
    sourced.value = absl::StrCat(DirectoryOf(path), "/", sourced.value);
  }
  sourced.source = absl::StrCat(path, ":", entry.key_mark.line + 1, " ", entry.path);
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
  const yaml::Reader reader(path);
  absl::StatusOr<yaml::Map> top =
      yaml::Map::Read(reader, *root, "", {"server", "token_file", "tls"});
  if (!top.ok()) return top.status();
  for (const yaml::Entry& entry : top->entries()) {
    if (entry.key == "tls") {
      absl::StatusOr<yaml::Map> tls =
          yaml::Map::Read(reader, entry, {"ca", "cert", "key", "server_name"});
      if (!tls.ok()) return tls.status();
      for (const yaml::Entry& file : tls->entries()) {
        const bool is_name = file.key == "server_name";
        absl::StatusOr<SourcedValue> value = StringValue(reader, file, /*is_path=*/!is_name);
        if (!value.ok()) return value.status();
        (is_name             ? config.server_name
         : file.key == "ca"   ? config.ca
         : file.key == "cert" ? config.cert
                              : config.key) = *std::move(value);
      }
      continue;
    }
    absl::StatusOr<SourcedValue> value = StringValue(reader, entry, entry.key == "token_file");
    if (!value.ok()) return value.status();
    (entry.key == "server" ? config.server : config.token_file) = *std::move(value);
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
  settings.server_name = First(FromFlag(arguments, "tls-server-name"), file.server_name);
  return settings;
}

}  // namespace weightpath::ctl
