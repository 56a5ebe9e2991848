#include "server/security/tls_reloader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/thread_name.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {
namespace {

constexpr char kPrefix[] = "weightpath-tls.";
constexpr char kLockName[] = "lock";
constexpr char kCurrent[] = "current";
constexpr char kKeyName[] = "key.pem";
constexpr char kCertificateName[] = "cert.pem";
constexpr char kClientCaName[] = "ca.pem";

// How often gRPC re-reads the private copies. They change only when a set
// is published, and reading three small files from memory each second
// costs nothing worth saving, so a renewal is served at most a second after
// this class has checked it.
constexpr unsigned int kProviderRefreshSeconds = 1;

// Without --reload_interval polling (0: SIGHUP only for the policy) the
// certificates are still looked at once a minute: a renewal must never
// wait for someone to send a signal.
constexpr absl::Duration kUnpolledInterval = absl::Seconds(60);

std::string UtcText(absl::Time at) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", at, absl::UTCTimeZone());
}

// "serial 1A2B (valid 2026-12-04T16:00:00Z to 2026-12-06T16:00:00Z)", and
// a warning in words when now is outside that.
std::string Describe(const TlsMaterial& material) {
  std::string text = absl::StrCat("serial ", material.serial, " (valid ",
                                  UtcText(material.not_before), " to ",
                                  UtcText(material.not_after), ")");
  const absl::Time now = absl::Now();
  if (now > material.not_after) absl::StrAppend(&text, ", EXPIRED: clients will refuse it");
  if (now < material.not_before) absl::StrAppend(&text, ", NOT YET VALID: clients will refuse it");
  return text;
}

// A certificate clients will refuse is served all the same (it may be the
// only one there is), but said louder.
spdlog::level::level_enum LevelFor(const TlsMaterial& material) {
  const absl::Time now = absl::Now();
  return now > material.not_after || now < material.not_before ? spdlog::level::warn
                                                                : spdlog::level::info;
}

void RemoveTree(const std::string& path) {
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
}

// Directories of ours that a server killed before it could clean up left
// under `parent`: same owner, 0700, and a lock nobody holds any more. A
// live server holds its lock from before the lock file has its name, so a
// directory being set up is never taken for a stale one.
void RemoveStaleCopies(const std::string& parent) {
  struct CloseDir {
    void operator()(DIR* dir) const { closedir(dir); }
  };
  std::unique_ptr<DIR, CloseDir> entries(opendir(parent.c_str()));
  if (entries == nullptr) return;
  while (const dirent* entry = readdir(entries.get())) {
    if (!absl::StartsWith(entry->d_name, kPrefix)) continue;
    const std::string path = absl::StrCat(parent, "/", entry->d_name);
    struct stat info;
    if (lstat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != geteuid() ||
        (info.st_mode & 077) != 0) {
      continue;
    }
    UniqueFd lock(open(absl::StrCat(path, "/", kLockName).c_str(),
                       O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!lock.valid() || flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;
    RemoveTree(path);
    spdlog::info("removed {}, TLS copies left by a server that did not stop cleanly", path);
  }
}

// One copy, 0600, never through a link, with the modification time given.
absl::Status WriteCopy(const std::string& path, const std::string& contents,
                       int64_t mtime_seconds) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus(errno, path);
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t done = write(fd.get(), contents.data() + written, contents.size() - written);
    if (done < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat(path, ": write failed"));
    }
    written += static_cast<size_t>(done);
  }
  const struct timespec times[2] = {{static_cast<time_t>(mtime_seconds), 0},
                                    {static_cast<time_t>(mtime_seconds), 0}};
  if (futimens(fd.get(), times) != 0) return ErrnoStatus(errno, path);
  // No fsync: the copies are rebuilt from the operator's files at every
  // start, so they need to be whole when renamed into view, not durable.
  return absl::OkStatus();
}

}  // namespace

TlsReloader::TlsReloader(TlsPaths paths, absl::Duration interval)
    : paths_(std::move(paths)), interval_(interval) {}

absl::StatusOr<std::unique_ptr<TlsReloader>> TlsReloader::Create(TlsPaths paths,
                                                                 absl::Duration interval) {
  std::unique_ptr<TlsReloader> reloader(new TlsReloader(std::move(paths), interval));
  // Before the read: a file changed while it is read differs from these,
  // and is read again at the first check.
  reloader->last_seen_ = reloader->TakeFingerprints();
  absl::StatusOr<TlsMaterial> material = LoadTlsMaterial(reloader->paths_);
  if (!material.ok()) return material.status();
  reloader->served_ = *std::move(material);
  if (absl::Status made = reloader->MakeDirectory(); !made.ok()) return made;
  if (absl::Status published = reloader->Publish(reloader->served_); !published.ok()) {
    return absl::Status(published.code(),
                        absl::StrCat("cannot write the private copy of the TLS files: ",
                                     published.message()));
  }
  const std::string current = absl::StrCat(reloader->directory_, "/", kCurrent, "/");
  reloader->provider_ = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      current + kKeyName, current + kCertificateName,
      reloader->has_client_ca() ? current + kClientCaName : "", kProviderRefreshSeconds);
  spdlog::log(LevelFor(reloader->served_),
              "TLS: serving the certificate in --tls_cert={}: {}; gRPC reads checked copies in {}",
              reloader->paths_.certificate, Describe(reloader->served_), reloader->directory_);
  return reloader;
}

TlsReloader::~TlsReloader() {
  Stop();
  // gRPC's reader thread ends with the last reference to its provider; the
  // server's credentials held the others and are gone by now (the server
  // declares this object before its gRPC server). Were one left, its reads
  // of the removed copies would only fail and be retried, never abort.
  provider_.reset();
  if (!directory_.empty()) RemoveTree(directory_);
}

std::string TlsReloader::served_certificate_path() const {
  return absl::StrCat(directory_, "/", kCurrent, "/", kCertificateName);
}

std::string TlsReloader::served_client_ca_path() const {
  return has_client_ca() ? absl::StrCat(directory_, "/", kCurrent, "/", kClientCaName) : "";
}

TlsReloader::Fingerprints TlsReloader::TakeFingerprints() const {
  Fingerprints fingerprints;
  fingerprints.certificate = TakeFingerprint(paths_.certificate);
  fingerprints.key = TakeFingerprint(paths_.key);
  if (has_client_ca()) fingerprints.client_ca = TakeFingerprint(paths_.client_ca);
  return fingerprints;
}

absl::Status TlsReloader::MakeDirectory() {
  std::vector<std::string> parents = {"/dev/shm"};
  if (const char* tmpdir = std::getenv("TMPDIR"); tmpdir != nullptr && *tmpdir != '\0') {
    parents.emplace_back(tmpdir);
  }
  parents.emplace_back("/tmp");
  std::vector<std::string> failures;
  for (const std::string& parent : parents) {
    RemoveStaleCopies(parent);
    std::string name = absl::StrCat(parent, "/", kPrefix, "XXXXXX");
    if (mkdtemp(name.data()) == nullptr) {
      failures.push_back(ErrnoStatus(errno, parent).ToString());
      continue;
    }
    directory_ = name;
    // Locked under a temporary name, then renamed: another server's
    // RemoveStaleCopies finds `lock` only once it is held.
    const std::string pending = absl::StrCat(directory_, "/", kLockName, ".new");
    lock_.reset(open(pending.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!lock_.valid() || flock(lock_.get(), LOCK_EX | LOCK_NB) != 0 ||
        rename(pending.c_str(), absl::StrCat(directory_, "/", kLockName).c_str()) != 0) {
      return ErrnoStatus(errno, absl::StrCat(directory_, ": cannot lock"));
    }
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat(
      "no directory for the private copy of the TLS files: ", absl::StrJoin(failures, "; ")));
}

absl::Status TlsReloader::Publish(const TlsMaterial& material) {
  const std::string name = absl::StrCat(generation_ + 1);
  const std::string set = absl::StrCat(directory_, "/", name);
  if (mkdir(set.c_str(), 0700) != 0) return ErrnoStatus(errno, set);
  // Whole seconds, later than the set before, whatever the clock says:
  // gRPC compares the key file's time before and after it reads the pair.
  const int64_t mtime = std::max<int64_t>(std::time(nullptr), last_mtime_seconds_ + 1);
  absl::Status written = WriteCopy(absl::StrCat(set, "/", kKeyName), material.private_key, mtime);
  if (written.ok()) {
    written =
        WriteCopy(absl::StrCat(set, "/", kCertificateName), material.certificate_chain, mtime);
  }
  if (written.ok() && has_client_ca()) {
    written = WriteCopy(absl::StrCat(set, "/", kClientCaName), material.client_ca, mtime);
  }
  const std::string link = absl::StrCat(directory_, "/", kCurrent, ".new");
  unlink(link.c_str());
  if (written.ok() && symlink(name.c_str(), link.c_str()) != 0) written = ErrnoStatus(errno, link);
  if (written.ok() &&
      rename(link.c_str(), absl::StrCat(directory_, "/", kCurrent).c_str()) != 0) {
    written = ErrnoStatus(errno, link);
  }
  if (!written.ok()) {
    RemoveTree(set);
    return written;
  }
  ++generation_;
  last_mtime_seconds_ = mtime;
  // The set before stays: gRPC may have resolved `current` to it just
  // before the switch and still be reading it.
  if (generation_ > 2) RemoveTree(absl::StrCat(directory_, "/", generation_ - 2));
  return absl::OkStatus();
}

void TlsReloader::Start(std::function<void(TlsCheck)> on_check) {
  on_check_ = std::move(on_check);
  thread_ = std::thread([this] { Run(); });
}

void TlsReloader::RequestCheck() {
  absl::MutexLock lock(&mutex_);
  check_requested_ = true;
}

void TlsReloader::Stop() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void TlsReloader::Run() {
  NameThisThread("wp-tls");
  const absl::Duration every =
      interval_ > absl::ZeroDuration() ? std::max(interval_, absl::Seconds(1)) : kUnpolledInterval;
  auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return stopping_ || check_requested_;
  };
  for (;;) {
    {
      absl::MutexLock lock(&mutex_);
      mutex_.AwaitWithTimeout(absl::Condition(&woken), every);
      if (stopping_) return;
      check_requested_ = false;
    }
    Check();
  }
}

void TlsReloader::Check() {
  // Nothing changed since the last round: nothing to read, and a refused
  // change is refused (and counted and logged) once, not every round.
  const Fingerprints now = TakeFingerprints();
  if (now == last_seen_) return;
  last_seen_ = now;
  absl::StatusOr<TlsMaterial> loaded = LoadTlsMaterial(paths_);
  if (!loaded.ok()) {
    spdlog::warn("TLS files not taken, still serving the certificate with {}: {}",
                 Describe(served_), std::string(loaded.status().message()));
    refused_ = true;
    if (on_check_) on_check_(TlsCheck::kRefused);
    return;
  }
  if (loaded->SameFiles(served_)) {
    // E.g. a file emptied and written back with the same contents.
    if (std::exchange(refused_, false)) {
      spdlog::info("TLS files usable again; the certificate served is unchanged ({})",
                   Describe(served_));
      if (on_check_) on_check_(TlsCheck::kUsableAgain);
    }
    return;
  }
  if (absl::Status published = Publish(*loaded); !published.ok()) {
    spdlog::error("TLS files not taken, still serving the certificate with {}: {}",
                  Describe(served_), std::string(published.message()));
    // Tried again next round, whether or not the files change.
    last_seen_ = Fingerprints();
    refused_ = true;
    if (on_check_) on_check_(TlsCheck::kRefused);
    return;
  }
  served_ = *std::move(loaded);
  refused_ = false;
  spdlog::log(LevelFor(served_), "TLS: serving the renewed certificate in --tls_cert={}: {}",
              paths_.certificate, Describe(served_));
  if (on_check_) on_check_(TlsCheck::kTaken);
}

}  // namespace weightpath::server
