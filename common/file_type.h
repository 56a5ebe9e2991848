// What a path that is not a regular file is, in the words every refusal uses
// ("... is a FIFO, not a regular file"): the server's bounded reader, the
// agent's local files and its file:// artifacts name it the same way.
#pragma once

#include <sys/stat.h>

#include "absl/strings/string_view.h"

namespace weightpath {

inline absl::string_view FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace weightpath
