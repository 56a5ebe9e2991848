// The policy's verified flags and expected figures, per path name and
// hardware class, in the shape the verification rules take.
#pragma once

#include <vector>

#include "policy/policy.h"
#include "store/verification.h"

namespace weightpath::store {

// One entry per (rule's hardware class, path the rule leads to). A rule that
// names no class applies to every class. A path name reached on a class
// through several definitions is policy-verified there if any of them is.
std::vector<PathExpectation> ExpectationsFromPolicy(const policy::Policy& policy);

}  // namespace weightpath::store
