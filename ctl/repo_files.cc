#include "ctl/repo_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/control_characters.h"
#include "common/status_macros.h"
#include "trust/crypto.h"

namespace weightpath::ctl {
namespace {

// A key file is a few hundred bytes; anything much larger is not one.
constexpr int64_t kMaxKeyFileBytes = 64 * 1024;

// The errno of the call that just failed, as "PATH: WHAT: reason".
absl::Status ErrnoError(const std::string& what, const std::string& path) {
  return ErrnoStatus(errno, absl::StrCat(path, ": ", what));
}

absl::Status WriteAll(int fd, const std::string& bytes, const std::string& path) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", path);
    }
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Makes a rename durable: the directory entry itself is on disk.
void SyncDirectory(const std::string& directory) {
  UniqueFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

std::vector<std::string> SplitList(const std::string& comma_separated) {
  std::vector<std::string> items;
  for (absl::string_view item : absl::StrSplit(comma_separated, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (!item.empty()) items.emplace_back(item);
  }
  return items;
}

}  // namespace

RepositoryLayout LayoutOf(const std::string& repository) {
  std::string root = repository;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return RepositoryLayout{root, root + "/metadata", root + "/staged"};
}

bool FileExists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, int64_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("cannot open", path);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return ErrnoError("cannot stat", path);
  if (!S_ISREG(info.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, ": not a file"));
  if (info.st_size > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": ", info.st_size,
                                                     " bytes, more than the ", max_bytes,
                                                     " allowed"));
  }
  std::string bytes;
  bytes.resize(static_cast<size_t>(info.st_size));
  size_t read_bytes = 0;
  while (read_bytes < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + read_bytes, bytes.size() - read_bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read", path);
    }
    if (n == 0) break;
    read_bytes += static_cast<size_t>(n);
  }
  bytes.resize(read_bytes);
  return bytes;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string temporary = absl::StrCat(path, ".tmp.", ::getpid());
  {
    UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) return ErrnoError("cannot create", temporary);
    absl::Status written = WriteAll(fd.get(), bytes, temporary);
    if (written.ok() && ::fsync(fd.get()) != 0) written = ErrnoError("fsync", temporary);
    if (!written.ok()) {
      ::unlink(temporary.c_str());
      return written;
    }
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    absl::Status status = ErrnoError("cannot rename into place", path);
    ::unlink(temporary.c_str());
    return status;
  }
  SyncDirectory(DirectoryOf(path));
  return absl::OkStatus();
}

absl::Status RemoveFileIfPresent(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError("cannot remove", path);
  return absl::OkStatus();
}

absl::Status EnsureDirectory(const std::string& path, unsigned mode) {
  if (::mkdir(path.c_str(), static_cast<mode_t>(mode)) == 0) return absl::OkStatus();
  if (errno != EEXIST) return ErrnoError("cannot create directory", path);
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": exists and is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status CreateSecretFile(const std::string& path, const std::string& bytes) {
  // O_EXCL: an existing key is never overwritten (it may be the only copy
  // of a key some root still trusts); the mode is set at creation, so the
  // key is never readable by others, not even briefly.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat(path, ": exists; refusing to overwrite a key"));
    }
    return ErrnoError("cannot create", path);
  }
  // The umask cannot widen 0600, but a directory's default ACL could.
  if (::fchmod(fd.get(), 0600) != 0) return ErrnoError("chmod", path);
  RETURN_IF_ERROR(WriteAll(fd.get(), bytes, path));
  if (::fsync(fd.get()) != 0) return ErrnoError("fsync", path);
  return absl::OkStatus();
}

namespace {

absl::StatusOr<FileDigest> DigestOpenFile(int fd, const std::string& path) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                  &EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("cannot initialise SHA-256");
  }
  std::vector<unsigned char> buffer(1 << 20);
  FileDigest digest;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read", path);
    }
    if (n == 0) break;
    EVP_DigestUpdate(context.get(), buffer.data(), static_cast<size_t>(n));
    digest.length += n;
  }
  unsigned char raw[EVP_MAX_MD_SIZE];
  unsigned int raw_length = 0;
  EVP_DigestFinal_ex(context.get(), raw, &raw_length);
  digest.sha256 = trust::HexEncode(
      absl::string_view(reinterpret_cast<const char*>(raw), raw_length));
  return digest;
}

std::string Quoted(absl::string_view path) { return absl::StrCat("\"", ControlEscaped(path), "\""); }

const char* KindOf(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Every regular file under `directory` + "/" + `relative` (recursively),
// by its relative path. Nothing is followed: a link inside could point
// anywhere, and what a device installs must be what was signed.
absl::Status WalkModelDirectory(const std::string& directory, const std::string& relative,
                                std::vector<std::pair<std::string, std::string>>& found) {
  const std::string here = relative.empty() ? directory : absl::StrCat(directory, "/", relative);
  struct CloseDir {
    void operator()(DIR* dir) const { ::closedir(dir); }
  };
  std::unique_ptr<DIR, CloseDir> dir(::opendir(here.c_str()));
  if (!dir) return ErrnoError("cannot open directory", here);
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir.get())) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = relative.empty() ? name : absl::StrCat(relative, "/", name);
    const std::string full = absl::StrCat(directory, "/", path);
    struct stat info {};
    if (::lstat(full.c_str(), &info) != 0) return ErrnoError("cannot stat", full);
    if (S_ISDIR(info.st_mode)) {
      RETURN_IF_ERROR(WalkModelDirectory(directory, path, found));
      continue;
    }
    if (!S_ISREG(info.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Quoted(full), " is ", KindOf(info.st_mode),
          "; a directory build holds regular files only (copy the file in its place)"));
    }
    if (found.size() == trust::kMaxBuildFiles) {
      return absl::InvalidArgumentError(absl::StrCat(
          directory, ": more than ", trust::kMaxBuildFiles, " files; a build holds at most that"));
    }
    found.emplace_back(path, full);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FileDigest> DigestFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("cannot open", path);
  return DigestOpenFile(fd.get(), path);
}

absl::StatusOr<std::vector<trust::BuildManifestFile>> DigestModelDirectory(
    const std::string& directory) {
  std::vector<std::pair<std::string, std::string>> found;
  RETURN_IF_ERROR(WalkModelDirectory(directory, "", found));
  std::vector<trust::BuildManifestFile> files;
  files.reserve(found.size());
  for (const auto& [path, full] : found) {
    if (absl::Status valid = trust::CheckBuildFilePath(path); !valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(full), ": cannot be a file of a build: path ", valid.message()));
    }
    // O_NOFOLLOW and a second look: the walk saw a regular file, and a
    // link or FIFO swapped in since is refused rather than read.
    UniqueFd fd(::open(full.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (fd.get() < 0) return ErrnoError("cannot open", full);
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(Quoted(full), " is not a regular file"));
    }
    ASSIGN_OR_RETURN(FileDigest digest, DigestOpenFile(fd.get(), full));
    files.push_back({path, digest.sha256, static_cast<uint64_t>(digest.length)});
  }
  if (files.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(directory, ": holds no file"));
  }
  if (absl::Status valid = trust::ValidateBuildFiles(files); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(directory, ": ", valid.message()));
  }
  return files;
}

absl::Status CheckDirectoryAgainstBuild(const std::string& directory,
                                        const std::vector<trust::BuildManifestFile>& signed_files) {
  ASSIGN_OR_RETURN(std::vector<trust::BuildManifestFile> held, DigestModelDirectory(directory));
  std::map<std::string, const trust::BuildManifestFile*> listed;
  for (const trust::BuildManifestFile& file : signed_files) listed[file.path] = &file;
  std::vector<std::string> faults;
  for (const trust::BuildManifestFile& file : held) {
    auto it = listed.find(file.path);
    if (it == listed.end()) {
      faults.push_back(absl::StrCat(Quoted(file.path), ": not in the signed build (extra file)"));
      continue;
    }
    const trust::BuildManifestFile& expected = *it->second;
    if (expected.size_bytes != file.size_bytes) {
      faults.push_back(absl::StrCat(Quoted(file.path), ": ", file.size_bytes,
                                    " bytes, the signed build says ", expected.size_bytes));
    } else if (expected.sha256 != file.sha256) {
      faults.push_back(absl::StrCat(Quoted(file.path), ": sha256 ", file.sha256,
                                    ", the signed build says ", expected.sha256));
    }
    listed.erase(it);
  }
  for (const auto& [path, file] : listed) {
    faults.push_back(absl::StrCat(Quoted(path), ": missing (the signed build lists it)"));
  }
  if (faults.empty()) return absl::OkStatus();
  const size_t shown = std::min<size_t>(faults.size(), 20);
  std::vector<std::string> head(faults.begin(), faults.begin() + static_cast<long>(shown));
  return absl::FailedPreconditionError(absl::StrCat(
      directory, ": does not match the signed build (", faults.size(), " fault(s)",
      shown < faults.size() ? absl::StrCat(", first ", shown) : std::string(), "): ",
      absl::StrJoin(head, "; ")));
}

absl::StatusOr<RepositoryLock> RepositoryLock::Acquire(const RepositoryLayout& layout) {
  const std::string path = layout.root + "/.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoError("cannot open the repository lock", path);
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": another weightpathctl repo command is changing this repository"));
    }
    return ErrnoError("flock", path);
  }
  return RepositoryLock(std::move(fd));
}

absl::StatusOr<std::vector<LoadedKey>> LoadKeyFiles(const std::string& comma_separated,
                                                    std::vector<std::string>& warnings) {
  std::vector<LoadedKey> keys;
  const std::vector<std::string> paths = SplitList(comma_separated);
  if (paths.empty()) return absl::InvalidArgumentError("no key file given");
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(std::string pem, ReadBoundedFile(path, kMaxKeyFileBytes));
    LoadedKey loaded;
    loaded.path = path;
    if (pem.find("PRIVATE KEY-----") != std::string::npos) {
      absl::StatusOr<trust::Ed25519PrivateKey> key = trust::Ed25519PrivateKey::FromPem(pem);
      trust::WipeSecret(pem);
      if (!key.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", key.status().message()));
      }
      struct stat info {};
      if (::stat(path.c_str(), &info) == 0 && (info.st_mode & 077) != 0) {
        warnings.push_back(absl::StrCat(path, ": private key readable by group or others; chmod 600 it"));
      }
      loaded.signer = trust::MakeSigningKey(path, *std::move(key));
      loaded.key = loaded.signer->key;
    } else {
      absl::StatusOr<trust::Ed25519PublicKey> key = trust::Ed25519PublicKey::FromPem(pem);
      if (!key.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": ", key.status().message(),
            " (expected an ed25519 PEM key from `openssl genpkey -algorithm ed25519` or "
            "`openssl pkey -pubout`)"));
      }
      loaded.key = trust::MakeEd25519Key(*key);
    }
    for (const LoadedKey& earlier : keys) {
      if (earlier.key.keyid == loaded.key.keyid) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": the same key as ", earlier.path));
      }
    }
    keys.push_back(std::move(loaded));
  }
  return keys;
}

absl::StatusOr<std::vector<trust::SigningKey>> LoadSigningKeys(const std::string& comma_separated,
                                                               std::vector<std::string>& warnings) {
  ASSIGN_OR_RETURN(std::vector<LoadedKey> loaded, LoadKeyFiles(comma_separated, warnings));
  std::vector<trust::SigningKey> signers;
  for (LoadedKey& key : loaded) {
    if (!key.signer) {
      return absl::InvalidArgumentError(
          absl::StrCat(key.path, ": a public key; signing needs the private key file"));
    }
    signers.push_back(*std::move(key.signer));
  }
  return signers;
}

}  // namespace weightpath::ctl
