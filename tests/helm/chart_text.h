// Reads the chart's templates without helm: enough of Go template syntax to
// resolve the simple references the checks care about ({{ .Values.a.b }} and
// {{ $name }} bound to a string literal), leaving every other action as text.
#pragma once

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::helm_test {

// NOT_FOUND naming the path when it cannot be read.
absl::StatusOr<std::string> ReadFileText(const std::string& path);

// The node at a dotted path ("ports.grpc"); an undefined node when any step
// is missing.
YAML::Node ValueAt(const YAML::Node& root, const std::string& dotted_path);

// Replaces {{ .Values.x.y }} (or {{ int .Values.x.y }}) whose value is a
// scalar, and {{ $name }} where the template sets $name := "literal", by
// their text.
std::string SubstituteSimpleReferences(const std::string& template_text, const YAML::Node& values);

// Every --name the text passes (a command-line flag, not a YAML "---").
std::set<std::string> FlagNamesUsed(const std::string& text);

}  // namespace weightpath::helm_test
