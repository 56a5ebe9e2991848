// rollout promote: the policy change that makes a rollout's action
// permanent, as rules of the policy document (policy/README.md, "Policy
// document schema"), so that it goes through the review of any policy edit
// (weightpathctl policy plan) instead of living on as a rollout.
//
// A rollout shapes a selected device's decision; the equivalent rules go
// first under `rules:` and match the same devices:
//  - the selector: match_labels and each `In` requirement become `labels`
//    (one rule per combination of an `In`'s values, at most 16), its
//    hardware_classes `hardware_class`; NotIn, Exists and DoesNotExist have
//    no rule equivalent and are refused naming the requirement;
//  - pin_path P: `path: P`, for the classes some rule of the policy gives P
//    to (a pin never applies elsewhere; known only with the document);
//  - set_priority X: a copy of every rule that matches at priority X, in
//    order, without its priority condition and narrowed to the selector
//    (needs the document);
//  - pin_artifact: refused: a rule chooses a path, the catalog its build.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::ctl {

struct Promotion {
  // The rules with comments (no document), or the whole document with the
  // rules added (ready to save and give to policy plan --policy).
  std::string text;
  int rules = 0;
};

// `document` is the served policy document's text, read from
// `document_path` (named in errors). INVALID_ARGUMENT naming the rollout's
// field, or the document's file and what is wrong with it.
absl::StatusOr<Promotion> PromoteToPolicy(const v1::Rollout& rollout,
                                          const std::optional<std::string>& document,
                                          const std::string& document_path);

}  // namespace weightpath::ctl
