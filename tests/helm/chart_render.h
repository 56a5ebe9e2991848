// The chart rendered for real: runs tests/helm/render's helm_render (helm's
// template engine rebuilt from Debian's Go packages) on helm/weightpath and
// parses every manifest it prints.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::helm_test {

struct RenderedManifest {
  std::string source;  // "weightpath/templates/deployment.yaml"
  std::string text;
  YAML::Node document;
};

struct RenderedChart {
  // false when helm would refuse to install: a failed guard, a value the
  // schema refuses, a cluster outside the chart's kubeVersion.
  bool ok = false;
  std::string error;  // what helm would print after "Error: "
  std::vector<RenderedManifest> manifests;
  std::string notes;  // NOTES.txt as `helm install` prints it

  // The manifests of one kind (e.g. "Deployment"). Read them through const
  // nodes: a non-const operator[] inserts what it looks up.
  std::vector<YAML::Node> OfKind(const std::string& kind) const;
  // The only manifest of `kind`; an undefined node when there is none or
  // more than one.
  const YAML::Node Only(const std::string& kind) const;
};

// Renders helm/weightpath with `args` added to helm_render's command line
// ("--set", "insecure=true", "--api-versions", ...), as release "wp" in
// namespace "fleet". FAILED_PRECONDITION when helm_render was not built (no
// Go), INTERNAL when it crashes or prints a manifest yaml-cpp cannot parse.
absl::StatusOr<RenderedChart> RenderChart(const std::vector<std::string>& args);

}  // namespace weightpath::helm_test
