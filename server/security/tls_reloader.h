// Renewed TLS files served without a restart, and never a file that could
// crash or wedge the server. gRPC 1.51 offers no provider that takes
// certificates from memory and can change them, only one that re-reads
// files (FileWatcherCertificateProvider), and that one aborts the process
// on an empty certificate or key, blocks for good in open() on a FIFO, and
// takes a key written before its certificate. So gRPC never reads the
// operator's files: this class reads and checks them (LoadTlsMaterial) and
// gives gRPC private copies of the last set that passed, which it replaces
// only with another set that passed.
//
// The copies live in a fresh 0700 directory (mkdtemp) under /dev/shm,
// which is memory (a private key never reaches a disk) and writable on a
// read-only root filesystem, or else under $TMPDIR or /tmp. Each set is a
// new subdirectory of 0600 files, switched to by renaming a `current`
// symlink over the old one, so a reader opening current/cert.pem and
// current/key.pem sees one set or the other. gRPC's reader guards against
// a pair changing while it reads by comparing the key file's modification
// time (whole seconds) before and after; every set's files get a time at
// least a second later than the set before, so a switch in the middle of
// its read is always seen and read again. The directory is removed when
// this object goes away; one left by a process that was killed is removed
// by the next server to start (its lock is no longer held).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "server/config/file_fingerprint.h"
#include "server/security/tls_material.h"

namespace weightpath::server {

// What one check of the operator's files came to.
enum class TlsCheck {
  kTaken,        // a renewed set, served from now on
  kRefused,      // a change that did not pass; the set in use serves on
  kUsableAgain,  // after a refusal, the files are again the set in use
};

class TlsReloader {
 public:
  // Reads and checks the files (errors name the flag, so a bad file stops
  // the start), writes the first copy and makes gRPC's provider on it.
  // `interval`: how often the operator's files are checked once Start()ed.
  static absl::StatusOr<std::unique_ptr<TlsReloader>> Create(TlsPaths paths,
                                                             absl::Duration interval);
  ~TlsReloader();
  TlsReloader(const TlsReloader&) = delete;
  TlsReloader& operator=(const TlsReloader&) = delete;

  // What the server's credentials are built on.
  const std::shared_ptr<grpc::experimental::CertificateProviderInterface>& provider() const {
    return provider_;
  }
  bool has_client_ca() const { return !paths_.client_ca.empty(); }
  // The copies gRPC serves from, for weightpath_tls_certificate_expiry_*:
  // they describe what is served, not what was last written to the
  // operator's files. "" for the CA without --client_ca.
  std::string served_certificate_path() const;
  std::string served_client_ca_path() const;

  // Checks the files every interval on a thread of its own; `on_check` is
  // told of every check that found a change.
  void Start(std::function<void(TlsCheck)> on_check);
  // A check now (SIGHUP); returns at once.
  void RequestCheck();
  // Ends the thread; the copies stay until destruction, for gRPC.
  void Stop();

 private:
  TlsReloader(TlsPaths paths, absl::Duration interval);

  struct Fingerprints {
    FileFingerprint certificate, key, client_ca;
    bool operator==(const Fingerprints& other) const {
      return certificate == other.certificate && key == other.key && client_ca == other.client_ca;
    }
  };
  Fingerprints TakeFingerprints() const;

  absl::Status MakeDirectory();
  // Writes `material` as the next set and points `current` at it.
  absl::Status Publish(const TlsMaterial& material);
  // One round of the thread: reads the files if any changed since the last
  // round, and publishes them if they pass.
  void Check();
  void Run();

  const TlsPaths paths_;
  const absl::Duration interval_;
  std::string directory_;  // the private directory; "" until made
  UniqueFd lock_;          // held while the directory is in use
  int64_t generation_ = 0;
  int64_t last_mtime_seconds_ = 0;
  TlsMaterial served_;
  Fingerprints last_seen_;
  bool refused_ = false;  // the last change seen was not taken
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider_;
  std::function<void(TlsCheck)> on_check_;

  absl::Mutex mutex_;
  bool check_requested_ ABSL_GUARDED_BY(mutex_) = false;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace weightpath::server
