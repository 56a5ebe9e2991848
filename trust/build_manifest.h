// The manifest of a directory build: every file of a model directory (its
// relative path, size and SHA-256), as one canonical document whose digest
// stands for the whole build. TUF signs the manifest as one target; a device
// that checked the manifest's digest against the signed one has checked
// every file's name and bytes, so a file swapped, dropped, added or taken
// from another build is refused.
//
// The canonical form is OLPC canonical JSON (trust/json.h, what TUF signs):
//
//   {"files":[{"path":"config.json","sha256":"<64 hex>","size_bytes":1234},...],
//    "format":"weightpath-build-manifest/1"}
//
// with the files sorted bytewise by path, no whitespace, integers as
// integers. The same file list always gives the same bytes, so the server
// can derive a manifest's digest from a catalog's `files:` and a device from
// the files a decision lists, without the document ever being downloaded.
//
// Paths are hostile input (they name files the agent creates): see
// CheckBuildFilePath.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trust/json.h"

namespace weightpath::trust {

inline constexpr char kBuildManifestFormat[] = "weightpath-build-manifest/1";
// A sharded 70B model is ~30 shards plus a handful of tokenizer and config
// files; 4,096 leaves room and bounds the memory a hostile list can take.
inline constexpr size_t kMaxBuildFiles = 4096;
inline constexpr size_t kMaxBuildFilePathBytes = 512;
inline constexpr size_t kMaxBuildFilePathComponentBytes = 255;  // NAME_MAX
inline constexpr size_t kMaxBuildFilePathDepth = 16;
// kMaxBuildFiles entries of the longest path: what a manifest may weigh.
inline constexpr size_t kMaxBuildManifestBytes =
    kMaxBuildFiles * (kMaxBuildFilePathBytes + 160) + 64;

struct BuildManifestFile {
  std::string path;
  std::string sha256;  // 64 lowercase hex digits
  uint64_t size_bytes = 0;
  friend bool operator==(const BuildManifestFile& a, const BuildManifestFile& b) {
    return a.path == b.path && a.sha256 == b.sha256 && a.size_bytes == b.size_bytes;
  }
};

// A path a build may hold: 1 to kMaxBuildFilePathBytes of well-formed UTF-8
// without control characters (C0, DEL, C1), NUL or backslash; relative (no
// leading '/'); '/'-separated components, each 1 to 255 bytes and neither
// "." nor ".."; at most kMaxBuildFilePathDepth of them; no trailing '/'.
// INVALID_ARGUMENT with the reason, which does not quote the path (the
// caller names it, escaped).
absl::Status CheckBuildFilePath(absl::string_view path);

// The whole list: 1 to kMaxBuildFiles files, each path valid, each sha256 64
// lowercase hex digits, and no two paths that would land on the same file on
// a device: equal, equal once ASCII case is folded (a case-insensitive
// filesystem such as an SD card's vfat), or one a directory of the other
// ("a" and "a/b"). INVALID_ARGUMENT naming the file (escaped) and the fault.
absl::Status ValidateBuildFiles(const std::vector<BuildManifestFile>& files);

// The canonical manifest of `files` (in any order; sorted here). Call
// ValidateBuildFiles first: this writes whatever it is given.
std::string CanonicalBuildManifest(std::vector<BuildManifestFile> files);

// The files as the manifest lists them (sorted by path): the array a
// signed target's custom "files" holds too.
Json BuildFilesToJson(std::vector<BuildManifestFile> files);
// That array back, bounded (kMaxBuildFiles, checked before any entry is
// read) and checked (ValidateBuildFiles); INVALID_ARGUMENT "<label>: ...".
absl::StatusOr<std::vector<BuildManifestFile>> BuildFilesFromJson(const Json& list,
                                                                  absl::string_view label);

// The manifest's SHA-256 (lowercase hex) and length: what a directory
// build's Artifact.sha256 and size_bytes are.
struct BuildManifestDigest {
  std::string sha256;
  uint64_t size_bytes = 0;
};
BuildManifestDigest DigestBuildManifest(const std::vector<BuildManifestFile>& files);

// Reads a manifest document (at most kMaxBuildManifestBytes), checks its
// format and every file (ValidateBuildFiles), and that it is canonical: a
// document whose bytes are not CanonicalBuildManifest of its own files is
// refused, so a manifest has exactly one digest. `label` names it in errors.
absl::StatusOr<std::vector<BuildManifestFile>> ParseBuildManifest(absl::string_view bytes,
                                                                  absl::string_view label);

// Any list of messages with path(), sha256() and size_bytes() (such as
// Artifact.files) as manifest files.
template <typename Files>
std::vector<BuildManifestFile> ToBuildManifestFiles(const Files& files) {
  std::vector<BuildManifestFile> out;
  out.reserve(static_cast<size_t>(files.size()));
  for (const auto& file : files) {
    out.push_back({std::string(file.path()), std::string(file.sha256()),
                   static_cast<uint64_t>(file.size_bytes())});
  }
  return out;
}

}  // namespace weightpath::trust
