// The files of a TUF repository as `weightpathctl repo` keeps them, and the
// key files it reads and writes.
//
//   REPO/metadata/   what a static HTTP server serves (trust.metadata_url):
//                    N.root.json for every root version, VERSION.targets.json
//                    and VERSION.snapshot.json (consistent snapshots), the
//                    latest of each also as root.json, targets.json,
//                    snapshot.json, and timestamp.json
//   REPO/staged/     proposed next root and targets versions with the
//                    signatures gathered so far; never served
//   REPO/.lock       held by the command that changes the repository
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "trust/build_manifest.h"
#include "trust/metadata.h"
#include "trust/repository.h"

namespace weightpath::ctl {

struct RepositoryLayout {
  std::string root;
  std::string metadata;
  std::string staged;

  std::string MetadataFile(const std::string& name) const { return metadata + "/" + name; }
  std::string StagedFile(const std::string& name) const { return staged + "/" + name; }
};
RepositoryLayout LayoutOf(const std::string& repository);

// The whole file, NOT_FOUND when it does not exist, RESOURCE_EXHAUSTED when
// it is larger than `max_bytes` (checked before reading it).
absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, int64_t max_bytes);
bool FileExists(const std::string& path);

// Written to a temporary file in the same directory, flushed to disk and
// renamed over `path`, so a reader (the HTTP server, a device) sees the old
// file or the new one, never half of one.
absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes);
absl::Status RemoveFileIfPresent(const std::string& path);
// Creates the directory (not its parents) unless it exists.
absl::Status EnsureDirectory(const std::string& path, unsigned mode);

// A new file readable by its owner only (0600), refused if it exists.
absl::Status CreateSecretFile(const std::string& path, const std::string& bytes);

// SHA-256 and length of a file of any size, read in chunks.
struct FileDigest {
  int64_t length = 0;
  std::string sha256;
};
absl::StatusOr<FileDigest> DigestFile(const std::string& path);

// A model directory as a directory build: every regular file under it
// (hidden ones included, sub-directories walked), its path relative to
// `directory`, size and SHA-256. Nothing is followed: a symbolic link,
// FIFO, device or socket inside is refused naming it. At most
// trust::kMaxBuildFiles files; the list passes trust::ValidateBuildFiles.
absl::StatusOr<std::vector<trust::BuildManifestFile>> DigestModelDirectory(
    const std::string& directory);

// The directory holds exactly the signed build: every listed file, with its
// size and SHA-256, and nothing else. FAILED_PRECONDITION listing each
// extra, missing or different file (the first 20).
absl::Status CheckDirectoryAgainstBuild(const std::string& directory,
                                        const std::vector<trust::BuildManifestFile>& signed_files);

// Exclusive use of REPO/.lock while this object lives; FAILED_PRECONDITION
// at once when another command holds it.
class RepositoryLock {
 public:
  static absl::StatusOr<RepositoryLock> Acquire(const RepositoryLayout& layout);
  RepositoryLock(RepositoryLock&& other) noexcept = default;
  RepositoryLock& operator=(RepositoryLock&&) = delete;

 private:
  explicit RepositoryLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // closing it releases the flock
};

// A key named on the command line: its public key always, its private key
// when the file holds one.
struct LoadedKey {
  std::string path;
  trust::Key key;
  std::optional<trust::SigningKey> signer;
};

// Comma-separated PEM files, private (PKCS#8, `openssl genpkey -algorithm
// ed25519`) or public (`openssl pkey -pubout`). The PEM text is wiped from
// memory once parsed. A private key file others can read is reported in
// `warnings` (the signature is still made: the key is already exposed).
absl::StatusOr<std::vector<LoadedKey>> LoadKeyFiles(const std::string& comma_separated,
                                                    std::vector<std::string>& warnings);
// As LoadKeyFiles, but every file must hold a private key.
absl::StatusOr<std::vector<trust::SigningKey>> LoadSigningKeys(const std::string& comma_separated,
                                                               std::vector<std::string>& warnings);

}  // namespace weightpath::ctl
