#include "server/timestamp_signer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "common/unique_fd.h"
#include "server/config/file_fingerprint.h"
#include "spdlog/spdlog.h"
#include "trust/crypto.h"
#include "trust/metadata.h"

namespace weightpath::server {
namespace {

constexpr size_t kMaxKeyFileBytes = 64 * 1024;

}  // namespace

absl::StatusOr<trust::SigningKey> LoadTimestampKey(const std::string& path) {
  const std::string flag = absl::StrCat("--timestamp_key=", path);
  // Every check on the descriptor that is read.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat(flag, ": cannot open"));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": not a regular file"));
  }
  if ((info.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s: mode %04o lets group or others reach a private key; chmod 600 (or 400) it", flag,
        info.st_mode & 07777));
  }
  if (static_cast<uint64_t>(info.st_size) > kMaxKeyFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": larger than ", kMaxKeyFileBytes, " bytes: not a key file"));
  }
  std::string pem(static_cast<size_t>(info.st_size), '\0');
  size_t filled = 0;
  while (filled < pem.size()) {
    const ssize_t got = ::read(fd.get(), pem.data() + filled, pem.size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    filled += static_cast<size_t>(got);
  }
  pem.resize(filled);
  absl::StatusOr<trust::Ed25519PrivateKey> key = trust::Ed25519PrivateKey::FromPem(pem);
  trust::WipeSecret(pem);
  if (!key.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": not an unencrypted ed25519 private key (PKCS#8 PEM, `openssl genpkey "
                           "-algorithm ed25519`)"));
  }
  return trust::MakeSigningKey(path, *std::move(key));
}

TimestampSigner::TimestampSigner(TimestampSignerOptions options, trust::SigningKey key,
                                 std::shared_ptr<SignedCatalogSource> source,
                                 ServerMetrics* metrics, std::function<void()> on_published)
    : options_(std::move(options)),
      key_(std::move(key)),
      source_(std::move(source)),
      metrics_(metrics),
      on_published_(std::move(on_published)) {}

TimestampSigner::~TimestampSigner() { Stop(); }

absl::StatusOr<std::unique_ptr<TimestampSigner>> TimestampSigner::Create(
    TimestampSignerOptions options, std::shared_ptr<SignedCatalogSource> source,
    ServerMetrics* metrics, std::function<void()> on_published) {
  ASSIGN_OR_RETURN(trust::SigningKey key, LoadTimestampKey(options.key_path));
  return std::unique_ptr<TimestampSigner>(new TimestampSigner(
      std::move(options), std::move(key), std::move(source), metrics, std::move(on_published)));
}

absl::Duration TimestampSigner::check_interval() const {
  return std::clamp(options_.lifetime / 10, absl::Seconds(1), absl::Minutes(1));
}

absl::Status TimestampSigner::CheckKey(absl::Time now) {
  ASSIGN_OR_RETURN(trust::Root root, source_->TrustedRoot(now));
  const trust::RoleKeys& role = root.roles.at("timestamp");
  if (std::find(role.keyids.begin(), role.keyids.end(), key_.key.keyid) == role.keyids.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timestamp_key=", options_.key_path, ": key ", trust::ShortKeyId(key_.key.keyid),
        " is not a timestamp key of the trusted root v", root.version, " (its timestamp keys: ",
        [&] {
          std::string ids;
          for (const std::string& id : role.keyids) {
            absl::StrAppend(&ids, ids.empty() ? "" : ", ", trust::ShortKeyId(id));
          }
          return ids;
        }(),
        ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TimestampSigner::Outcome> TimestampSigner::RunOnce(absl::Time now) {
  ASSIGN_OR_RETURN(trust::Root root, source_->TrustedRoot(now));
  const std::vector<trust::SigningKey> keys = {key_};
  ASSIGN_OR_RETURN(std::vector<const trust::SigningKey*> chosen,
                   trust::KeysForRole(root, "timestamp", keys));

  // The repository lock of weightpathctl repo, when the layout is its own.
  UniqueFd lock;
  if (const std::string lock_path = source_->lock_path(); !lock_path.empty()) {
    lock.reset(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!lock.valid()) {
      return ErrnoStatus(errno, absl::StrCat(lock_path, ": cannot open the repository lock"));
    }
    if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) return Outcome::kSkipped;
      return ErrnoStatus(errno, absl::StrCat(lock_path, ": flock"));
    }
  }

  const trust::MetadataLimits limits;
  const std::string dir = source_->metadata_dir();
  const std::string timestamp_path = dir + "/timestamp.json";
  ASSIGN_OR_RETURN(const std::string current_bytes,
                   ReadWholeFile(timestamp_path, static_cast<size_t>(limits.timestamp_max_bytes)));
  // Not trusted here: it only says which snapshot to name and when it
  // expires. What is published is verified below, whole.
  ASSIGN_OR_RETURN(const trust::Metadata<trust::Timestamp> current,
                   trust::ParseTimestamp(current_bytes, timestamp_path));
  const trust::Timestamp& published = current.signed_part;
  if (published.expires - now > options_.lifetime / 2) return Outcome::kFresh;

  const int64_t snapshot_version = published.snapshot_meta.version;
  const std::string snapshot_name = trust::MetadataFileName(
      "snapshot", root.consistent_snapshot ? std::optional<int64_t>(snapshot_version) : std::nullopt);
  ASSIGN_OR_RETURN(const std::string snapshot_bytes,
                   ReadWholeFile(dir + "/" + snapshot_name,
                                 static_cast<size_t>(limits.snapshot_max_bytes)));
  if (published.snapshot_meta.length.has_value() &&
      *published.snapshot_meta.length != static_cast<int64_t>(snapshot_bytes.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, "/", snapshot_name, ": ", snapshot_bytes.size(), " bytes, but timestamp.json v",
        published.version, " names ", *published.snapshot_meta.length, "; not re-signing"));
  }
  for (const auto& [algorithm, digest] : published.snapshot_meta.hashes) {
    absl::StatusOr<std::string> actual = trust::HashHex(algorithm, snapshot_bytes);
    if (actual.ok() && *actual != digest) {
      return absl::FailedPreconditionError(absl::StrCat(dir, "/", snapshot_name, ": its ", algorithm,
                                                        " is not the one timestamp.json v",
                                                        published.version, " names; not re-signing"));
    }
  }

  // Whole seconds: TUF's expiry has no fractions.
  const absl::Time expires = absl::FromUnixSeconds(absl::ToUnixSeconds(now + options_.lifetime));
  trust::Timestamp probe;
  probe.version = published.version + 1;
  probe.expires = expires;
  RETURN_IF_ERROR(trust::CheckPublishable("timestamp", probe, published.version, now));
  ASSIGN_OR_RETURN(std::string next, trust::MakeTimestamp(snapshot_bytes, snapshot_version,
                                                          published.version, expires, chosen));
  absl::StatusOr<trust::TrustedMetadataSet> verified =
      source_->VerifyWithOverlay({{"timestamp.json", next}}, now);
  if (!verified.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to publish timestamp v", probe.version,
        ": a client holding the server's trusted state would refuse it: ",
        verified.status().message()));
  }
  RETURN_IF_ERROR(WriteFileAtomically(timestamp_path, next, 0644));
  spdlog::info("published {} v{} (snapshot v{}, expires {}), signed by timestamp key {}",
               timestamp_path, probe.version, snapshot_version, trust::FormatExpires(expires),
               trust::ShortKeyId(key_.key.keyid));
  return Outcome::kPublished;
}

void TimestampSigner::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void TimestampSigner::Stop() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void TimestampSigner::Run() {
  NameThisThread("wp-timestamp");
  for (;;) {
    {
      absl::MutexLock lock(&mutex_);
      const auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return stopping_; };
      mutex_.AwaitWithTimeout(absl::Condition(&stopping), check_interval());
      if (stopping_) return;
    }
    absl::StatusOr<Outcome> outcome = RunOnce(absl::Now());
    if (!outcome.ok()) {
      spdlog::error("timestamp not re-signed (retrying in {}): {}",
                    absl::FormatDuration(check_interval()), outcome.status().ToString());
      if (metrics_ != nullptr) metrics_->RecordTimestampSigned(false);
      continue;
    }
    if (*outcome == Outcome::kPublished) {
      if (metrics_ != nullptr) metrics_->RecordTimestampSigned(true);
      if (on_published_) on_published_();
    }
  }
}

}  // namespace weightpath::server
