// Replacing a file so that readers, and a reboot at any instant, see either
// the whole old contents or the whole new contents, never a mix.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace weightpath::agent {

// Writes `contents` to a temporary file in the target's directory, fsyncs
// it, renames it over `path`, then fsyncs the directory so the rename itself
// survives a power cut. Creates missing parent directories. On failure the
// old file is untouched and the temporary one removed. `before_rename` is a
// test seam: it runs once the data is durable but not yet visible.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 const std::function<void()>& before_rename = nullptr);

// A temporary file of WriteFileAtomically's naming younger than this may
// belong to a write in progress (one lives for milliseconds), so it is not
// stale yet.
inline constexpr absl::Duration kStaleTemporaryAge = absl::Minutes(1);

// The name WriteFileAtomically gives the temporary file for target file
// name `target`: `.<target>.tmp.` and mkstemp's six letters and digits. The
// target name of such a name, or empty when `name` is not one.
absl::string_view TemporaryFileTarget(absl::string_view name);

// Removes what WriteFileAtomically leaves behind when the process dies
// between creating its temporary file and the rename: entries of
// `directory` whose name TemporaryFileTarget maps to a target `is_target`
// accepts, that are regular files (never a symlink, which is not ours and
// whose target must not be touched) and whose mtime is at least `min_age`
// from now, either way: the wall clock that dated them may have been
// stepped since. Returns the paths removed. A missing directory has none;
// an entry that cannot be removed is skipped (the next boot tries again).
std::vector<std::string> RemoveStaleTemporaryFiles(
    const std::string& directory, const std::function<bool(absl::string_view)>& is_target,
    absl::Duration min_age = kStaleTemporaryAge);

// fsync of a directory, so a rename or unlink inside it is durable.
absl::Status SyncDirectory(const std::string& directory);

}  // namespace weightpath::agent
