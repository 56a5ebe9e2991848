#include "agent/fetch/verified_stamp.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/base/atomic_file.h"
#include "agent/base/local_file.h"
#include "agent/fetch/sha256_file.h"

namespace weightpath::agent {
namespace {

// Longer than the coarse clock tick the kernel stamps ctime with (4 ms at
// HZ=250, 10 ms at HZ=100), with room to spare.
constexpr absl::Duration kCtimeGranularityWindow = absl::Milliseconds(50);

int64_t Nanoseconds(const struct timespec& time) {
  return static_cast<int64_t>(time.tv_sec) * 1'000'000'000 + time.tv_nsec;
}

}  // namespace

absl::StatusOr<FileIdentity> StatFileIdentity(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    const std::string reason = std::strerror(errno);
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": ", reason));
    return absl::InternalError(absl::StrCat("cannot stat ", path, ": ", reason));
  }
  FileIdentity identity;
  identity.size = static_cast<uint64_t>(info.st_size);
  identity.mtime_ns = Nanoseconds(info.st_mtim);
  identity.ctime_ns = Nanoseconds(info.st_ctim);
  identity.inode = static_cast<uint64_t>(info.st_ino);
  identity.device = static_cast<uint64_t>(info.st_dev);
  return identity;
}

std::string StampPathFor(const std::string& artifact_path) {
  return artifact_path + ".verified";
}

std::string FormatStamp(const VerifiedStamp& stamp) {
  const FileIdentity& id = stamp.identity;
  return absl::StrCat("sha256 ", stamp.sha256, "\nsize ", id.size, "\nmtime_ns ", id.mtime_ns,
                      "\nctime_ns ", id.ctime_ns, "\ninode ", id.inode, "\ndevice ", id.device,
                      "\nverified_at_ns ", absl::ToUnixNanos(stamp.verified_at), "\n");
}

absl::StatusOr<VerifiedStamp> ParseStamp(const std::string& text) {
  VerifiedStamp stamp;
  int64_t verified_at_ns = 0;
  // Every field must appear exactly once, in this order, so a stamp cut
  // short by a crash or edited by hand is refused rather than half read.
  struct Field {
    const char* key;
    std::function<bool(absl::string_view)> parse;
  };
  const Field fields[] = {
      {"sha256",
       [&](absl::string_view v) {
         stamp.sha256 = std::string(v);
         return IsSha256Hex(stamp.sha256);
       }},
      {"size", [&](absl::string_view v) { return absl::SimpleAtoi(v, &stamp.identity.size); }},
      {"mtime_ns", [&](absl::string_view v) { return absl::SimpleAtoi(v, &stamp.identity.mtime_ns); }},
      {"ctime_ns", [&](absl::string_view v) { return absl::SimpleAtoi(v, &stamp.identity.ctime_ns); }},
      {"inode", [&](absl::string_view v) { return absl::SimpleAtoi(v, &stamp.identity.inode); }},
      {"device", [&](absl::string_view v) { return absl::SimpleAtoi(v, &stamp.identity.device); }},
      {"verified_at_ns", [&](absl::string_view v) { return absl::SimpleAtoi(v, &verified_at_ns); }},
  };
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  const size_t field_count = sizeof(fields) / sizeof(fields[0]);
  for (size_t i = 0; i < field_count; ++i) {
    if (i >= lines.size()) {
      return absl::DataLossError(absl::StrCat("stamp: ", fields[i].key, ": missing"));
    }
    const std::pair<absl::string_view, absl::string_view> key_value =
        absl::StrSplit(lines[i], absl::MaxSplits(' ', 1));
    if (key_value.first != fields[i].key) {
      return absl::DataLossError(absl::StrCat("stamp: line ", i + 1, ": expected ", fields[i].key,
                                              ", found '", key_value.first, "'"));
    }
    if (!fields[i].parse(key_value.second)) {
      return absl::DataLossError(
          absl::StrCat("stamp: ", fields[i].key, ": invalid value '", key_value.second, "'"));
    }
  }
  if (lines.size() != field_count) {
    return absl::DataLossError(
        absl::StrCat("stamp: line ", field_count + 1, ": unexpected trailing content"));
  }
  stamp.verified_at = absl::FromUnixNanos(verified_at_ns);
  return stamp;
}

absl::StatusOr<VerifiedStamp> ReadStamp(const std::string& stamp_path) {
  // A stamp is a few hundred bytes; anything else in its place (too large,
  // not a regular file) is as untrustworthy as a garbled one.
  constexpr size_t kMaxStampBytes = 4096;
  absl::StatusOr<std::string> text = ReadLocalFile(stamp_path, "stamp", kMaxStampBytes);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(absl::StrCat("no stamp at ", stamp_path));
    }
    if (absl::IsInvalidArgument(text.status())) return absl::DataLossError(text.status().message());
    return absl::InternalError(text.status().message());
  }
  absl::StatusOr<VerifiedStamp> stamp = ParseStamp(*text);
  if (!stamp.ok()) {
    return absl::Status(stamp.status().code(),
                        absl::StrCat(stamp_path, ": ", stamp.status().message()));
  }
  return stamp;
}

absl::Status WriteStamp(const std::string& stamp_path, const VerifiedStamp& stamp) {
  return WriteFileAtomically(stamp_path, FormatStamp(stamp));
}

bool ChangedTooRecentlyToStamp(const FileIdentity& identity, absl::Time now) {
  return now - absl::FromUnixNanos(identity.ctime_ns) < kCtimeGranularityWindow;
}

}  // namespace weightpath::agent
