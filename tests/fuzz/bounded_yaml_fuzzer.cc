// The one YAML loader every reader goes through (policy, catalog, server and
// agent config, rollout files), with limits small enough that short inputs
// reach them. A document it accepts must really be within the limits: the
// tree, walked with every alias expanded the way a reader copying it out
// would, holds no more nodes, bytes or nesting than the counting pass
// measured, and the measure is within the limits.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/bounded_yaml.h"
#include "tests/fuzz/fuzz_support.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::fuzz {
namespace {

struct Walk {
  uint64_t nodes = 0;
  uint64_t bytes = 0;
  size_t depth = 0;
  uint64_t budget = 0;  // stop once past this many nodes: a cycle or a bomb
};

void Visit(const YAML::Node& node, size_t depth, Walk& walk) {
  if (++walk.nodes > walk.budget) return;
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      walk.bytes += node.Scalar().size();
      return;
    case YAML::NodeType::Sequence:
      walk.depth = std::max(walk.depth, depth + 1);
      for (const YAML::Node& child : node) {
        Visit(child, depth + 1, walk);
        if (walk.nodes > walk.budget) return;
      }
      return;
    case YAML::NodeType::Map:
      walk.depth = std::max(walk.depth, depth + 1);
      for (const auto& entry : node) {
        Visit(entry.first, depth + 1, walk);
        Visit(entry.second, depth + 1, walk);
        if (walk.nodes > walk.budget) return;
      }
      return;
    default:
      return;
  }
}

}  // namespace
}  // namespace weightpath::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  const std::string_view raw = fuzz::Text(data, size);
  yaml::Limits limits;
  limits.max_bytes = 16384;
  limits.max_nodes = 2000;
  limits.max_depth = 12;
  yaml::Measure measure;
  absl::StatusOr<YAML::Node> root =
      yaml::LoadBounded(absl::string_view(raw.data(), raw.size()), "fuzz.yaml", limits, &measure);
  if (!root.ok()) {
    FUZZ_CHECK(fuzz::IsCleanRefusal(root.status()), root.status().ToString());
    return 0;
  }
  FUZZ_CHECK(measure.nodes <= limits.max_nodes && measure.expanded_bytes <= limits.max_bytes &&
                 measure.max_depth <= limits.max_depth,
             "accepted past a limit");
  // An empty text is a null document with no node in it at all.
  if (root->IsNull() && measure.nodes == 0) return 0;
  fuzz::Walk walk;
  walk.budget = limits.max_nodes;
  fuzz::Visit(*root, 0, walk);
  FUZZ_CHECK(walk.nodes <= measure.nodes,
             absl::StrCat("the tree has more nodes than were counted: ", walk.nodes, " > ",
                          measure.nodes));
  FUZZ_CHECK(walk.bytes <= measure.expanded_bytes,
             absl::StrCat("the tree has more text than was counted: ", walk.bytes, " > ",
                          measure.expanded_bytes));
  FUZZ_CHECK(walk.depth <= measure.max_depth,
             absl::StrCat("the tree nests deeper than was counted: ", walk.depth, " > ",
                          measure.max_depth));
  return 0;
}
