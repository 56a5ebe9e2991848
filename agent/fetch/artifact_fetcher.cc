#include "agent/fetch/artifact_fetcher.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "agent/base/atomic_file.h"
#include "agent/net/curl_library.h"
#include "agent/base/log.h"
#include "agent/fetch/sha256_file.h"
#include "agent/fetch/transfer_rate.h"
#include "common/control_characters.h"
#include "common/file_type.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"
#include "trust/build_manifest.h"

namespace weightpath::agent {
namespace {

namespace fs = std::filesystem;

struct CurlDeleter {
  const CurlApi* curl;
  void operator()(CURL* handle) const { curl->easy_cleanup(handle); }
};

// libcurl hands the body over in pieces of up to this many bytes: large
// enough that a gigabyte is a few thousand writes and hash updates, small
// enough for a device's memory with several transfers at once.
constexpr long kTransferBufferBytes = 256 * 1024;

// Where the bytes of one transfer go, the hash they feed as they stream,
// and the guard that stops a source from filling the disk with more than
// the artifact's declared size.
struct TransferSink {
  int fd = -1;
  Sha256Stream* hash = nullptr;
  TransferRate* rate = nullptr;  // null: no cap
  std::chrono::steady_clock::time_point until;
  uint64_t offset = 0;        // bytes in the file so far
  uint64_t expected_size = 0;
  uint64_t received = 0;
  bool oversized = false;
  int write_errno = 0;        // why the partial file took fewer bytes than sent
};

// Appends `bytes` to the sink's file and hash; the count written (fewer on
// a write error, whose errno is kept).
size_t AppendToSink(TransferSink* sink, const char* data, size_t bytes) {
  size_t written = 0;
  while (written < bytes) {
    const ssize_t put = ::write(sink->fd, data + written, bytes - written);
    if (put < 0) {
      if (errno == EINTR) continue;
      // libcurl only says "Failure writing output to destination": the
      // reason (a full volume) is kept for the error.
      sink->write_errno = errno;
      break;
    }
    written += static_cast<size_t>(put);
  }
  // Exactly the bytes the file took are hashed, so the digest always
  // describes the partial file, also after a failed write.
  sink->hash->Update(data, written);
  sink->offset += written;
  sink->received += written;
  if (sink->rate != nullptr) sink->rate->Take(written, sink->until);
  return written;
}

size_t WriteToSink(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<TransferSink*>(user);
  const size_t bytes = size * count;
  if (sink->offset + bytes > sink->expected_size) {
    sink->oversized = true;
    return 0;  // makes libcurl abort with CURLE_WRITE_ERROR
  }
  return AppendToSink(sink, data, bytes);
}

// Bytes an unprivileged process may still write on the volume of `path`;
// nullopt when it cannot be asked.
std::optional<uint64_t> FreeBytes(const std::string& path) {
  struct statvfs volume;
  if (::statvfs(path.c_str(), &volume) != 0) return std::nullopt;
  return static_cast<uint64_t>(volume.f_bavail) * static_cast<uint64_t>(volume.f_frsize);
}

bool IsOutOfSpace(int error) { return error == ENOSPC || error == EDQUOT || error == EFBIG; }

absl::string_view ErrnoName(int error) {
  switch (error) {
    case ENOSPC:
      return "ENOSPC";
    case EDQUOT:
      return "EDQUOT";
    case EFBIG:
      return "EFBIG";
    default:
      return "errno";
  }
}

uint64_t FileSizeOrZero(const std::string& path) {
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  return error ? 0 : static_cast<uint64_t>(size);
}

void RemoveQuietly(const std::string& path) {
  std::error_code ignored;
  fs::remove(path, ignored);
}

// A damaged artifact goes with its stamp, so no stamp outlives its file.
void RemoveCachedQuietly(const std::string& path) {
  RemoveQuietly(path);
  RemoveQuietly(StampPathFor(path));
}

struct TransferOutcome {
  CURLcode code = CURLE_OK;
  long http_status = 0;
  std::string error_text;
  bool oversized = false;
  uint64_t received = 0;
  int write_errno = 0;  // the partial file could not take the bytes
};

// A partial file that could not be written, as the error the caller acts
// on. Out of space (ENOSPC, a quota, the file size limit), the partial file
// is removed: kept for a resume, it would hold the volume full on every
// boot, and the state files (pending reports, the last good decision) could
// not be written either. Any other write error keeps it.
absl::Status PartialWriteError(int error, const std::string& partial_path,
                               const std::string& cache_dir) {
  const std::optional<uint64_t> free_bytes = FreeBytes(cache_dir);
  const std::string free_text =
      free_bytes.has_value() ? absl::StrCat(*free_bytes, " bytes free") : "free space unknown";
  if (!IsOutOfSpace(error)) {
    return absl::UnavailableError(absl::StrCat("cannot write ", partial_path, ": ",
                                               std::strerror(error), " (", free_text, " in ",
                                               cache_dir, "; kept for resume)"));
  }
  const uint64_t had = FileSizeOrZero(partial_path);
  RemoveQuietly(partial_path);
  return absl::ResourceExhaustedError(absl::StrCat(
      "cannot write ", partial_path, ": ", std::strerror(error), " (", ErrnoName(error), "); ",
      free_text, " in cache_dir ", cache_dir, "; the partial download (", had,
      " bytes) was removed so the volume is not left full"));
}

// The partial file of one download, open and locked for this process.
struct PartialDownload {
  std::string path;
  UniqueFd fd;
  Sha256Stream hash;  // of every byte in the file
};

// Opens (creating) `path` for appending and takes its lock. The lock says
// the file is being written: eviction (build_cache.h) prunes only partial
// files nobody holds, and a second agent process does not interleave its
// bytes with this one's (UNAVAILABLE, tried again later).
absl::Status OpenPartial(const std::string& path, PartialDownload* partial) {
  partial->path = path;
  // `cache list` and eviction look at the lock for an instant: a few short
  // waits tell that from a download holding it. A file pruned while this
  // waited (unlinked under its lock) is not the one at the path any more:
  // it is opened again.
  for (int tries = 0;; ++tries) {
    partial->fd.reset(
        ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!partial->fd.valid()) {
      return absl::InternalError(
          absl::StrCat("cannot open ", path, " for writing: ", std::strerror(errno)));
    }
    if (::flock(partial->fd.get(), LOCK_EX | LOCK_NB) == 0) {
      struct stat held, named;
      if (::fstat(partial->fd.get(), &held) == 0 && ::lstat(path.c_str(), &named) == 0 &&
          held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
        return absl::OkStatus();
      }
    } else if (errno != EWOULDBLOCK) {
      return absl::InternalError(absl::StrCat("cannot lock ", path, ": ", std::strerror(errno)));
    }
    if (tries >= 20) {
      return absl::UnavailableError(
          absl::StrCat(path, " is being written by another download; tried again later"));
    }
    ::usleep(10'000);
  }
}

uint64_t SizeOf(const PartialDownload& partial) {
  struct stat info;
  return ::fstat(partial.fd.get(), &info) == 0 ? static_cast<uint64_t>(info.st_size) : 0;
}

// Empties the partial file to download it again from its first byte.
absl::Status StartOver(PartialDownload* partial) {
  partial->hash.Reset();
  if (::ftruncate(partial->fd.get(), 0) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot truncate ", partial->path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Every byte received stays in the partial file for a resume, whatever
// happened to the transfer; an fsync that fails out of space is reported as
// the write that failed.
absl::Status SyncPartial(const PartialDownload& partial, TransferOutcome* outcome) {
  if (::fsync(partial.fd.get()) == 0) return absl::OkStatus();
  if (IsOutOfSpace(errno)) {
    outcome->write_errno = errno;
    if (outcome->code == CURLE_OK) outcome->code = CURLE_WRITE_ERROR;
    return absl::OkStatus();
  }
  return absl::InternalError(
      absl::StrCat("cannot flush ", partial.path, ": ", std::strerror(errno)));
}

// One libcurl transfer appending to the partial file from byte `offset`.
absl::StatusOr<TransferOutcome> Transfer(const CurlApi& api, const v1::Artifact& artifact,
                                         PartialDownload* partial, uint64_t offset,
                                         absl::Duration time_limit, TransferRate* rate,
                                         const FetchOptions& options) {
  std::unique_ptr<CURL, CurlDeleter> curl(api.easy_init(), CurlDeleter{&api});
  if (!curl) return absl::InternalError("curl_easy_init failed");
  TransferSink sink;
  sink.fd = partial->fd.get();
  sink.hash = &partial->hash;
  sink.rate = rate;
  sink.until = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(absl::ToInt64Milliseconds(time_limit));
  sink.offset = offset;
  sink.expected_size = artifact.size_bytes();
  char error_buffer[CURL_ERROR_SIZE] = {0};
  CURL* handle = curl.get();
  api.easy_setopt(handle, CURLOPT_URL, artifact.uri().c_str());
  // file:// never reaches libcurl (see CopyLocalSource); nor may a redirect.
  api.easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
  api.easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  api.easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 1L);
  api.easy_setopt(handle, CURLOPT_MAXREDIRS, 5L);
  api.easy_setopt(handle, CURLOPT_FAILONERROR, 1L);
  // No signals: several transfers run in threads of one process.
  api.easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  api.easy_setopt(handle, CURLOPT_BUFFERSIZE, kTransferBufferBytes);
  api.easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer);
  api.easy_setopt(handle, CURLOPT_WRITEFUNCTION, &WriteToSink);
  api.easy_setopt(handle, CURLOPT_WRITEDATA, &sink);
  api.easy_setopt(handle, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(time_limit))));
  if (options.stall_timeout > absl::ZeroDuration()) {
    const long seconds =
        static_cast<long>(std::max<int64_t>(1, absl::ToInt64Seconds(options.stall_timeout)));
    api.easy_setopt(handle, CURLOPT_LOW_SPEED_TIME, seconds);
    api.easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT,
                    static_cast<long>(std::max<uint64_t>(1, options.stall_min_rate)));
    api.easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS,
                    static_cast<long>(std::max<int64_t>(
                        1, absl::ToInt64Milliseconds(options.stall_timeout))));
  }
  if (offset > 0) {
    api.easy_setopt(handle, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(offset));
  }
  TransferOutcome outcome;
  outcome.code = api.easy_perform(handle);
  api.easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &outcome.http_status);
  outcome.error_text = error_buffer[0] != '\0' ? error_buffer : api.easy_strerror(outcome.code);
  outcome.oversized = sink.oversized;
  outcome.received = sink.received;
  outcome.write_errno = sink.write_errno;
  RETURN_IF_ERROR(SyncPartial(*partial, &outcome));
  return outcome;
}

// Turns a failed transfer into the error the caller acts on. The partial
// file stays for network trouble and goes for anything that says the bytes
// themselves are wrong.
absl::Status TransferError(const v1::Artifact& artifact, const TransferOutcome& outcome,
                           const std::string& partial_path, const std::string& cache_dir) {
  if (outcome.write_errno != 0 && !outcome.oversized) {
    return PartialWriteError(outcome.write_errno, partial_path, cache_dir);
  }
  const uint64_t have = FileSizeOrZero(partial_path);
  // Nothing received (a 500, a host that never answered) is nothing to
  // resume: no empty partial file stays behind for it.
  if (have == 0) RemoveQuietly(partial_path);
  const std::string progress =
      have == 0 ? "no bytes received"
                : absl::StrCat(have, " of ", artifact.size_bytes(), " bytes in ", partial_path);
  const absl::string_view kept = have == 0 ? "" : " (kept for resume)";
  if (outcome.oversized) {
    RemoveQuietly(partial_path);
    return absl::DataLossError(absl::StrCat("artifact ", artifact.uri(),
                                            " is larger than artifact.size_bytes (",
                                            artifact.size_bytes(), "); download discarded"));
  }
  switch (outcome.code) {
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(absl::StrCat("download of ", artifact.uri(),
                                                      " ran out of time with ", progress,
                                                      kept));
    case CURLE_HTTP_RETURNED_ERROR:
      if (outcome.http_status == 404 || outcome.http_status == 410) {
        return absl::NotFoundError(absl::StrCat("artifact.uri: ", artifact.uri(), " answered HTTP ",
                                                outcome.http_status));
      }
      return absl::UnavailableError(absl::StrCat(
          "artifact.uri: ", artifact.uri(), " answered HTTP ", outcome.http_status,
          have == 0 ? "" : absl::StrCat("; ", progress, kept)));
    case CURLE_FILE_COULDNT_READ_FILE:
      return absl::NotFoundError(
          absl::StrCat("artifact.uri: cannot read ", artifact.uri(), ": ", outcome.error_text));
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
      return absl::InvalidArgumentError(
          absl::StrCat("artifact.uri: ", artifact.uri(), ": ", outcome.error_text));
    default:
      return absl::UnavailableError(absl::StrCat("download of ", artifact.uri(),
                                                 " interrupted with ", progress, kept, ": ",
                                                 outcome.error_text));
  }
}

// The local path a file:// URI names, as libcurl would read it: an empty or
// "localhost" authority, the path up to any query or fragment, %XX decoded.
absl::StatusOr<std::string> LocalPathOf(const std::string& uri) {
  absl::string_view rest = uri;
  absl::ConsumePrefix(&rest, "file://");
  if (!absl::StartsWith(rest, "/") && !absl::ConsumePrefix(&rest, "localhost")) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact.uri: '", uri, "' names another host; file:// must be local"));
  }
  rest = rest.substr(0, rest.find_first_of("?#"));
  if (!absl::StartsWith(rest, "/")) {
    return absl::InvalidArgumentError(absl::StrCat("artifact.uri: '", uri, "' has no absolute path"));
  }
  std::string path;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] != '%') {
      path += rest[i];
      continue;
    }
    int byte = 0;
    // Two hex digits must follow; %00 would cut the path short.
    if (i + 2 >= rest.size() || !absl::ascii_isxdigit(static_cast<unsigned char>(rest[i + 1])) ||
        !absl::ascii_isxdigit(static_cast<unsigned char>(rest[i + 2])) ||
        !absl::SimpleHexAtoi(rest.substr(i + 1, 2), &byte) || byte == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("artifact.uri: '", uri, "' has a malformed %-escape at byte ", i));
    }
    path += static_cast<char>(byte);
    i += 2;
  }
  return path;
}

// Appends to `partial_path` from byte `offset` what the local file behind a
// file:// URI holds, until `deadline`.
//
// Not left to libcurl: its file:// reader opens the path with a blocking
// open() and reads without any timeout, so a FIFO (or a terminal, or a
// device) named by the catalog would keep the boot waiting past its budget,
// for ever if no writer comes. Here the source is opened once without
// blocking, must be a regular file by fstat of that descriptor (so a path
// swapped after a check cannot slip through), and the clock is looked at
// between chunks.
absl::Status CopyLocalSource(const v1::Artifact& artifact, PartialDownload* partial,
                             uint64_t offset, Clock& clock, MonotonicTime deadline,
                             TransferRate* rate, TransferOutcome* outcome,
                             uint64_t* resumed_from) {
  ASSIGN_OR_RETURN(const std::string source_path, LocalPathOf(artifact.uri()));
  UniqueFd source(::open(source_path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (source.get() < 0) {
    return absl::NotFoundError(absl::StrCat("artifact.uri: cannot read ", artifact.uri(), ": ",
                                            std::strerror(errno)));
  }
  struct stat info;
  if (::fstat(source.get(), &info) != 0) {
    return absl::NotFoundError(absl::StrCat("artifact.uri: cannot stat ", artifact.uri(), ": ",
                                            std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("artifact.uri: ", artifact.uri(), " is ",
                                                   FileTypeName(info.st_mode),
                                                   ", not a regular file"));
  }
  // A partial file longer than the source cannot be continued: start over.
  if (offset > static_cast<uint64_t>(info.st_size)) {
    RETURN_IF_ERROR(StartOver(partial));
    offset = 0;
  }
  *resumed_from = offset;
  TransferSink sink;
  sink.fd = partial->fd.get();
  sink.hash = &partial->hash;
  sink.rate = rate;
  sink.until = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(
                   std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - clock.MonotonicNow())));
  sink.offset = offset;
  sink.expected_size = artifact.size_bytes();
  constexpr size_t kChunkBytes = 1 << 20;
  std::vector<char> buffer(kChunkBytes);
  uint64_t position = offset;
  for (;;) {
    if (clock.MonotonicNow() >= deadline) {
      outcome->code = CURLE_OPERATION_TIMEDOUT;
      break;
    }
    const ssize_t got = ::pread(source.get(), buffer.data(), buffer.size(),
                                static_cast<off_t>(position));
    if (got < 0) {
      if (errno == EINTR) continue;
      outcome->code = CURLE_READ_ERROR;
      outcome->error_text = absl::StrCat("cannot read ", source_path, ": ", std::strerror(errno));
      break;
    }
    if (got == 0) break;
    if (position + static_cast<uint64_t>(got) > artifact.size_bytes()) {
      outcome->oversized = true;  // the source holds more than the artifact
      outcome->code = CURLE_WRITE_ERROR;
      break;
    }
    const size_t put = AppendToSink(&sink, buffer.data(), static_cast<size_t>(got));
    outcome->received += put;
    if (put < static_cast<size_t>(got)) {
      outcome->write_errno = sink.write_errno;
      outcome->code = CURLE_WRITE_ERROR;
      return absl::OkStatus();
    }
    position += static_cast<uint64_t>(got);
  }
  return SyncPartial(*partial, outcome);
}

// A partial download must be a file the agent wrote; anything else in its
// place (a FIFO would block the open for writing) is removed.
void RemoveIfNotARegularFile(const std::string& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) RemoveQuietly(path);
}

// Checks a complete download against the catalog entry, by the digest its
// bytes fed as they arrived (no second pass over them); installs it with a
// rename or deletes it.
absl::Status VerifyAndInstall(const v1::Artifact& artifact, PartialDownload* partial,
                              const std::string& final_path, const std::string& cache_dir) {
  const uint64_t size = SizeOf(*partial);
  if (size != artifact.size_bytes()) {
    RemoveQuietly(partial->path);
    return absl::DataLossError(absl::StrCat("artifact ", artifact.uri(), " is truncated: got ",
                                            size, " bytes, artifact.size_bytes is ",
                                            artifact.size_bytes(), "; download discarded"));
  }
  if (partial->hash.bytes() != size) {
    // The stream did not see every byte (it cannot happen, but a digest of
    // other bytes must never vouch for these): hash the file itself.
    partial->hash.Reset();
    RETURN_IF_ERROR(HashFilePrefix(partial->fd.get(), size, partial->path, &partial->hash));
  }
  ASSIGN_OR_RETURN(std::string digest, partial->hash.FinishHex());
  if (digest != artifact.sha256()) {
    RemoveQuietly(partial->path);
    return absl::DataLossError(absl::StrCat("artifact ", artifact.uri(),
                                            " is corrupted: sha256 is ", digest,
                                            ", artifact.sha256 is ", artifact.sha256(),
                                            "; download discarded"));
  }
  // A fresh download is not stamped: its ctime is too recent to trust (see
  // ChangedTooRecentlyToStamp), so the next check hashes and stamps it.
  RemoveQuietly(StampPathFor(final_path));
  if (::rename(partial->path.c_str(), final_path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", partial->path, " to ", final_path,
                                            ": ", std::strerror(errno)));
  }
  return SyncDirectory(cache_dir);
}

}  // namespace

namespace {

absl::Status ValidateUri(const std::string& uri, absl::string_view field) {
  if (uri.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty"));
  if (!absl::StartsWith(uri, "https://") && !absl::StartsWith(uri, "http://") &&
      !absl::StartsWith(uri, "file://")) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", ControlEscaped(uri),
                                                   "' is not https://, http:// or file://"));
  }
  return absl::OkStatus();
}

// One file's source: what Fetch downloads.
absl::Status ValidateBlob(const v1::Artifact& artifact) {
  RETURN_IF_ERROR(ValidateUri(artifact.uri(), "artifact.uri"));
  if (!IsSha256Hex(artifact.sha256())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "artifact.sha256: '", ControlEscaped(artifact.sha256()), "' is not 64 lowercase hex digits"));
  }
  if (artifact.size_bytes() == 0) {
    return absl::InvalidArgumentError("artifact.size_bytes: must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateArtifact(const v1::Artifact& artifact) {
  if (artifact.files().empty()) return ValidateBlob(artifact);
  if (!artifact.uri().empty()) {
    return absl::InvalidArgumentError(
        "artifact.uri: must be empty for a directory build (each of artifact.files has its own)");
  }
  const std::vector<trust::BuildManifestFile> files = trust::ToBuildManifestFiles(artifact.files());
  if (absl::Status valid = trust::ValidateBuildFiles(files); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("artifact.files: ", valid.message()));
  }
  for (const v1::BuildFile& file : artifact.files()) {
    RETURN_IF_ERROR(ValidateUri(
        file.uri(), absl::StrCat("artifact.files[", ControlEscaped(file.path()), "].uri")));
  }
  const trust::BuildManifestDigest digest = trust::DigestBuildManifest(files);
  if (digest.sha256 != artifact.sha256() || digest.size_bytes != artifact.size_bytes()) {
    // The signed (sha256, size_bytes) stands for the whole file list: files
    // that are not what it was computed from are another build.
    return absl::InvalidArgumentError(absl::StrCat(
        "artifact.files: their manifest has sha256 ", digest.sha256, " and ", digest.size_bytes,
        " bytes, but artifact.sha256 is ", ControlEscaped(artifact.sha256()),
        " and artifact.size_bytes ", artifact.size_bytes(),
        " (the files listed are not the build the digest names)"));
  }
  return absl::OkStatus();
}

ArtifactFetcher::ArtifactFetcher(std::string cache_dir)
    : ArtifactFetcher(std::move(cache_dir), SystemClockInstance(), kDefaultReverifyAfter) {}

ArtifactFetcher::ArtifactFetcher(std::string cache_dir, Clock* clock,
                                 absl::Duration reverify_after)
    : cache_dir_(std::move(cache_dir)), clock_(clock), reverify_after_(reverify_after) {}

std::string ArtifactFetcher::CachedPath(const std::string& sha256) const {
  return (fs::path(cache_dir_) / sha256).string();
}

absl::StatusOr<std::string> ArtifactFetcher::VerifyCached(const v1::Artifact& artifact) {
  ASSIGN_OR_RETURN(CachedArtifact cached, CheckCached(artifact));
  return cached.path;
}

absl::StatusOr<CachedArtifact> ArtifactFetcher::CheckCached(const v1::Artifact& artifact) {
  RETURN_IF_ERROR(ValidateBlob(artifact));
  const std::string path = CachedPath(artifact.sha256());
  absl::StatusOr<FileIdentity> identity = StatFileIdentity(path);
  if (absl::IsNotFound(identity.status())) {
    return absl::NotFoundError(absl::StrCat("artifact not cached at ", path));
  }
  RETURN_IF_ERROR(identity.status());
  if (identity->size != artifact.size_bytes()) {
    RemoveCachedQuietly(path);
    return absl::DataLossError(absl::StrCat("cached artifact ", path, " has ", identity->size,
                                            " bytes, artifact.size_bytes is ",
                                            artifact.size_bytes(), "; deleted"));
  }
  if (StampVouches(path, artifact.sha256(), *identity)) return CachedArtifact{path, false};
  ASSIGN_OR_RETURN(std::string digest, Sha256OfFile(path));
  if (digest != artifact.sha256()) {
    RemoveCachedQuietly(path);
    return absl::DataLossError(absl::StrCat("cached artifact ", path, " is corrupted: sha256 is ",
                                            digest, "; deleted"));
  }
  StampIfUnchanged(path, digest, *identity);
  return CachedArtifact{path, true};
}

bool ArtifactFetcher::StampVouches(const std::string& path, const std::string& sha256,
                                   const FileIdentity& identity) {
  const absl::StatusOr<VerifiedStamp> stamp = ReadStamp(StampPathFor(path));
  if (!stamp.ok()) {
    if (!absl::IsNotFound(stamp.status())) {
      log::Warn("artifact cache: stamp unusable, hashing {}: {}", path,
                   stamp.status().ToString());
    }
    return false;
  }
  if (stamp->sha256 != sha256 || stamp->identity != identity) {
    log::Info("artifact cache: {} changed since its stamp, hashing it", path);
    return false;
  }
  const absl::Duration age = clock_->Now() - stamp->verified_at;
  if (age < absl::ZeroDuration() || age >= reverify_after_) {
    // A clock before the stamp (a device that booted without its real-time
    // clock set) cannot tell the age, so it is treated as expired.
    log::Info("artifact cache: stamp of {} is {} old (re-verified every {}), hashing it", path,
                 absl::FormatDuration(age), absl::FormatDuration(reverify_after_));
    return false;
  }
  return true;
}

void ArtifactFetcher::StampIfUnchanged(const std::string& path, const std::string& sha256,
                                       const FileIdentity& before_hash) {
  const absl::StatusOr<FileIdentity> after_hash = StatFileIdentity(path);
  if (!after_hash.ok() || *after_hash != before_hash ||
      ChangedTooRecentlyToStamp(before_hash, absl::Now())) {
    // Written during or just before the hash: the digest may not describe
    // the bytes now on disk under this identity, so the next check hashes.
    RemoveQuietly(StampPathFor(path));
    return;
  }
  const VerifiedStamp stamp{sha256, before_hash, clock_->Now()};
  if (absl::Status written = WriteStamp(StampPathFor(path), stamp); !written.ok()) {
    log::Warn("artifact cache: cannot stamp {} as verified: {}", path, written.ToString());
  }
}

absl::Status ArtifactFetcher::CheckRoomFor(const v1::Artifact& artifact,
                                           const std::string& partial_path, uint64_t offset) {
  const std::optional<uint64_t> free_bytes = FreeBytes(cache_dir_);
  if (!free_bytes.has_value()) return absl::OkStatus();  // the write itself will tell
  const uint64_t needed = artifact.size_bytes() - offset;
  if (*free_bytes >= free_space_reserve_ && *free_bytes - free_space_reserve_ >= needed) {
    return absl::OkStatus();
  }
  std::string partial_note;
  if (offset > 0 && *free_bytes < free_space_reserve_) {
    // The partial file itself holds the reserve: it goes, or the state
    // files could not be written on this volume.
    RemoveQuietly(partial_path);
    partial_note = absl::StrCat("; the partial download (", offset,
                                " bytes) was removed to give the reserve back");
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "not downloading ", artifact.uri(), " into cache_dir ", cache_dir_, ": ", *free_bytes,
      " bytes free, it needs ", needed, " more and ", free_space_reserve_,
      " stay free for the agent's state files (cache_reserve_bytes); it would end in ENOSPC "
      "(no space left on device)",
      partial_note));
}

absl::StatusOr<FetchResult> ArtifactFetcher::Fetch(const v1::Artifact& artifact,
                                                   absl::Duration time_limit) {
  return Fetch(artifact, time_limit, FetchOptions());
}

absl::StatusOr<FetchResult> ArtifactFetcher::Fetch(const v1::Artifact& artifact,
                                                   absl::Duration time_limit,
                                                   const FetchOptions& options) {
  // Monotonic, from the start of the call: checking the cache counts too.
  const MonotonicTime deadline = clock_->MonotonicNow() + time_limit;
  RETURN_IF_ERROR(ValidateBlob(artifact));
  std::error_code error;
  fs::create_directories(cache_dir_, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cache_dir: cannot create ", cache_dir_, ": ", error.message()));
  }
  FetchResult result;
  result.path = CachedPath(artifact.sha256());
  absl::StatusOr<CachedArtifact> cached = CheckCached(artifact);
  if (cached.ok()) {
    result.hashed = cached->hashed;
    return result;
  }
  // DATA_LOSS: a damaged copy was just deleted, so download it afresh.
  if (cached.status().code() != absl::StatusCode::kNotFound &&
      cached.status().code() != absl::StatusCode::kDataLoss) {
    return cached.status();
  }
  if (clock_->MonotonicNow() >= deadline) {
    return absl::DeadlineExceededError(
        absl::StrCat("no time left in the budget to download ", artifact.uri()));
  }

  const std::string partial_path = result.path + ".partial";
  RemoveIfNotARegularFile(partial_path);
  PartialDownload partial;
  RETURN_IF_ERROR(OpenPartial(partial_path, &partial));
  // Whatever ends this call, an empty partial file (nothing received, a
  // source refused before any byte) is nothing to resume: it goes, while
  // still locked.
  struct RemoveIfEmpty {
    const PartialDownload& partial;
    ~RemoveIfEmpty() {
      if (SizeOf(partial) == 0) RemoveQuietly(partial.path);
    }
  } remove_if_empty{partial};
  uint64_t offset = SizeOf(partial);
  if (offset > 0 && offset <= artifact.size_bytes()) {
    // What an earlier attempt left is hashed once, then the stream goes on
    // from its end: every byte is hashed exactly once.
    if (!HashFilePrefix(partial.fd.get(), offset, partial_path, &partial.hash).ok()) {
      RETURN_IF_ERROR(StartOver(&partial));
      offset = 0;
    }
  }
  if (offset >= artifact.size_bytes()) {
    // Complete but never renamed (a crash between the two), or garbage:
    // the digest decides; a bad one is started over rather than resumed.
    if (offset == artifact.size_bytes() &&
        VerifyAndInstall(artifact, &partial, result.path, cache_dir_).ok()) {
      return result;
    }
    RETURN_IF_ERROR(StartOver(&partial));
    offset = 0;
  }
  RETURN_IF_ERROR(CheckRoomFor(artifact, partial_path, offset));
  result.downloaded = true;
  result.resumed_from = offset;
  if (absl::StartsWith(artifact.uri(), "file://")) {
    TransferOutcome outcome;
    RETURN_IF_ERROR(CopyLocalSource(artifact, &partial, offset, *clock_, deadline, rate_,
                                    &outcome, &result.resumed_from));
    result.bytes_transferred = outcome.received;
    if (outcome.code != CURLE_OK) return TransferError(artifact, outcome, partial_path, cache_dir_);
    RETURN_IF_ERROR(VerifyAndInstall(artifact, &partial, result.path, cache_dir_));
    return result;
  }
  ASSIGN_OR_RETURN(const CurlApi* curl, LoadCurl());
  // libcurl enforces the limit itself (CURLOPT_TIMEOUT_MS, on its own
  // monotonic clock) over the whole transfer: resolving, connecting, and a
  // server that sends nothing or trickles.
  ASSIGN_OR_RETURN(TransferOutcome outcome,
                   Transfer(*curl, artifact, &partial, offset, deadline - clock_->MonotonicNow(),
                            rate_, options));
  const bool range_refused =
      outcome.code == CURLE_RANGE_ERROR ||
      (outcome.code == CURLE_HTTP_RETURNED_ERROR && outcome.http_status == 416);
  if (range_refused && offset > 0 && !options.untrusted_source) {
    // The source ignores Range requests (200 instead of 206), or is now
    // shorter than the partial file (416): either way the partial file
    // cannot be continued, and the only safe choice is the whole file again.
    result.resumed_from = 0;
    const absl::Duration time_left = deadline - clock_->MonotonicNow();
    if (time_left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no time left in the budget to download ", artifact.uri(), " again from the start"));
    }
    RETURN_IF_ERROR(StartOver(&partial));
    ASSIGN_OR_RETURN(outcome, Transfer(*curl, artifact, &partial, 0, time_left, rate_, options));
  }
  result.bytes_transferred = outcome.received;
  if (outcome.code != CURLE_OK) {
    // A transfer that broke off after the artifact's last byte (a mirror
    // whose Content-Length claimed more than it sent, a limit that struck as
    // the last bytes came in) left the whole artifact: the size and digest
    // decide, as at a clean end, instead of a fallback with every byte here.
    if (!outcome.oversized && outcome.write_errno == 0 &&
        SizeOf(partial) == artifact.size_bytes()) {
      log::Info("artifact: transfer of {} ended early ({}) with all {} bytes; verifying them",
                   artifact.uri(), outcome.error_text, artifact.size_bytes());
      RETURN_IF_ERROR(VerifyAndInstall(artifact, &partial, result.path, cache_dir_));
      return result;
    }
    if (options.untrusted_source && outcome.write_errno == 0 && SizeOf(partial) > offset) {
      // Bytes from a source that failed cannot be judged until the file is
      // whole; the next source resumes from what was there before them.
      if (::ftruncate(partial.fd.get(), static_cast<off_t>(offset)) != 0) {
        (void)StartOver(&partial);
      }
    }
    return TransferError(artifact, outcome, partial_path, cache_dir_);
  }
  RETURN_IF_ERROR(VerifyAndInstall(artifact, &partial, result.path, cache_dir_));
  return result;
}

}  // namespace weightpath::agent
