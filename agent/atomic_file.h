// Replacing a file so that readers, and a reboot at any instant, see either
// the whole old contents or the whole new contents, never a mix.
#pragma once

#include <functional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace weightpath::agent {

// Writes `contents` to a temporary file in the target's directory, fsyncs
// it, renames it over `path`, then fsyncs the directory so the rename itself
// survives a power cut. Creates missing parent directories. On failure the
// old file is untouched and the temporary one removed. `before_rename` is a
// test seam: it runs once the data is durable but not yet visible.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 const std::function<void()>& before_rename = nullptr);

// fsync of a directory, so a rename or unlink inside it is durable.
absl::Status SyncDirectory(const std::string& directory);

}  // namespace weightpath::agent
