// Names a document by its content, so two servers (or a server and an agent)
// can tell whether they decide by the same policy.
#pragma once

#include <string>
#include <string_view>

namespace weightpath::policy {

// "sha256:" + the first 16 hex digits of SHA-256(text).
std::string ContentVersion(std::string_view text);

}  // namespace weightpath::policy
