// Where weightpathctl finds the server and its credentials when no flag
// says: each setting comes from the first of
//   1. its flag (--server, --token-file, --ca, --cert, --key),
//   2. the environment (WEIGHTPATH_SERVER, WEIGHTPATH_TOKEN_FILE),
//   3. the config file ($WEIGHTPATH_CONFIG, else ~/.config/weightpath/config.yaml):
//        server: HOST:PORT
//        token_file: FILE        # relative paths are relative to the config file
//        tls: {ca: FILE, cert: FILE, key: FILE, server_name: NAME}
//   4. the default: 127.0.0.1:50051 (the server's own default --listen), no
//      token, plaintext.
// Each value remembers where it came from, so an error about it names that
// source ("WEIGHTPATH_TOKEN_FILE=/x: mode 0644 ...").
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/command_line.h"

namespace weightpath::ctl {

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";

struct SourcedValue {
  std::string value;
  std::string source;  // "--server", "WEIGHTPATH_SERVER", "/home/a/.config/weightpath/config.yaml:2 server", "default"
};

struct ClientSettings {
  SourcedValue server;
  std::optional<SourcedValue> token_file;
  std::optional<SourcedValue> ca;
  std::optional<SourcedValue> cert;
  std::optional<SourcedValue> key;
  // The name the server's certificate must carry, when --server's host is
  // not it (--tls-server-name, else the config file's tls.server_name).
  std::optional<SourcedValue> server_name;
};

// Reads the environment through `getenv` (tests pass their own).
using Environment = std::function<std::optional<std::string>(const std::string&)>;
Environment ProcessEnvironment();

// INVALID_ARGUMENT naming the file:line of an unknown key or a value that
// is not a string, or the variable that names a missing config file
// ($WEIGHTPATH_CONFIG must exist; the default path may be absent).
absl::StatusOr<ClientSettings> ResolveClientSettings(const ParsedArguments& arguments,
                                                     const Environment& environment);

}  // namespace weightpath::ctl
