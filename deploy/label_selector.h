// Kubernetes-style label selectors over device labels, plus the optional
// hardware-class filter a rollout may add.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "policy/hardware_class.h"
#include "policy/policy.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::deploy {

using policy::Labels;

// Parses the kubectl syntax: comma-separated terms, each one of
//   k=v  k==v  k!=v  k in (a,b)  k notin (a,b)  k  !k
// Equalities land in match_labels (a second, different value for the same
// key becomes an IN requirement, so the selector then matches nothing, as in
// Kubernetes); everything else becomes a match_expressions entry. An empty
// or all-blank text gives an empty selector. Errors are INVALID_ARGUMENT
// naming the term (1-based) and the character position (1-based).
absl::StatusOr<v1::DeviceSelector> ParseLabelSelector(absl::string_view text);

// The selector written back in the syntax ParseLabelSelector accepts
// (hardware classes and `all` are not part of that syntax and are omitted).
std::string FormatLabelSelector(const v1::DeviceSelector& selector);

// Every requirement must hold (AND). `k!=v` and `notin` also match devices
// without the label, as in Kubernetes. An empty hardware_classes list admits
// every class. `all` adds nothing here: it only confirms, at validation, that
// an empty selector is meant.
bool Matches(const v1::DeviceSelector& selector, const Labels& labels,
             policy::HardwareClass hardware_class);

// The label requirements alone (match_labels and match_expressions), for
// callers that filter on labels only, such as ListDevices' label_selector.
bool MatchesLabels(const v1::DeviceSelector& selector, const Labels& labels);

// Key: optional DNS-subdomain prefix and '/', then a name of 1..63
// characters [A-Za-z0-9._-] that starts and ends alphanumeric.
absl::Status ValidateLabelKey(absl::string_view key, absl::string_view field);
// Value: empty, or 1..63 characters with the same rule as a key name.
absl::Status ValidateLabelValue(absl::string_view value, absl::string_view field);

// Keys, values, operators and their value counts, hardware class names, and
// that `all` is never mixed with requirements (that would be ambiguous).
// An empty selector is allowed here; a rollout additionally requires `all`.
// `field` prefixes every error, e.g. "rollout.selector".
absl::Status ValidateDeviceSelector(const v1::DeviceSelector& selector, absl::string_view field);

// True when the selector has no label requirement and no hardware class.
bool IsEmptySelector(const v1::DeviceSelector& selector);

}  // namespace weightpath::deploy
