// The one way weightpath turns YAML text into a node tree: every file it
// reads (policy, catalog, server and agent config, rollout files) comes
// through here, so a hostile file cannot cost more than the limits below.
//
// yaml-cpp keeps an alias as a second reference to the anchored node, so a
// 1 MB file that repeats an alias of a 1 MiB string 4000 times parses into a
// small tree, and only the reader that copies the strings out finds itself
// holding 4 GB. Before the tree is built, a first pass over the parser's
// events adds up what the document amounts to once every alias is expanded
// (scalar bytes, nodes, nesting) and refuses it as soon as a limit is
// crossed: the walk stops early and never expands anything itself, so a
// "billion laughs" document costs no more than its own text.
//
// Only the text is taken: reading files is the callers' business, which keeps
// this usable from the pure policy library.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::yaml {

struct Limits {
  // Bytes of scalar text (keys and values) once every alias stands for what
  // it repeats: what a reader that copies the document out ends up holding.
  // Without aliases this never exceeds the text's own length, so it is the
  // limit on the file's size too and the text itself is held to it.
  size_t max_bytes = 0;
  // Nodes once aliases are expanded. yaml-cpp holds about 0.5 KB for each
  // node it builds, so a file of 16 MiB made of "a," would otherwise become
  // a 4 GB tree without any alias.
  size_t max_nodes = 0;
  // Mappings and sequences open at once. The readers recurse over the tree,
  // and no document of ours nests deeper than a dozen levels.
  size_t max_depth = 64;
  // When set, polled while parsing: another thread storing true (a server
  // shutting down) makes the load return CANCELLED.
  const std::atomic<bool>* cancel = nullptr;
};

// What the first pass measured; returned for tests and diagnostics.
struct Measure {
  uint64_t expanded_bytes = 0;
  uint64_t nodes = 0;
  size_t max_depth = 0;
};

// Parses the first document of `text` within `limits`. Every refusal is
// INVALID_ARGUMENT beginning "<source_name>:<line>:<column>: " (or just
// "<source_name>: " where there is no position), naming the limit crossed or
// the YAML syntax error; a parser message has its control characters
// escaped, so it cannot forge a log line. CANCELLED when `limits.cancel` was
// set. An empty text is a null node, as with YAML::Load.
absl::StatusOr<YAML::Node> LoadBounded(absl::string_view text, absl::string_view source_name,
                                       const Limits& limits, Measure* measure = nullptr);

// "<source_name>:<line>:<column>" of a yaml-cpp position (which counts from
// 0), or "<source_name>" when the mark carries none.
std::string Place(absl::string_view source_name, const YAML::Mark& mark);

}  // namespace weightpath::yaml
