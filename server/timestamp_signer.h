// Keeps the timestamp of the --catalog repository fresh with an online
// ed25519 key (--timestamp_key): once the published timestamp.json has less
// than half of --timestamp_lifetime left (or has expired), the server signs
// the next version, naming the same snapshot, with a new expiry of
// --timestamp_lifetime from now; checks it as a client would (its own
// trusted state refreshed against the directory with the new file in
// front, and trust::CheckPublishable: not expired, version above the
// published); and writes it atomically over timestamp.json. Under
// weightpathctl repo's layout it holds REPO/.lock while it does, so it never
// races `weightpathctl repo timestamp`; a lock held by another is a skipped
// round. The key is read once, never printed; a key file that group or
// others may access is refused.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/observability/metrics.h"
#include "server/config/signed_catalog.h"
#include "trust/repository.h"

namespace weightpath::server {

struct TimestampSignerOptions {
  std::string key_path;                      // --timestamp_key
  absl::Duration lifetime = absl::Hours(24);  // --timestamp_lifetime
};

// The PEM private key at `path`, refused (naming the file, never its
// contents) when it is not a regular file, when group or others have any
// access to it, or when it is not an unencrypted ed25519 PKCS#8 key.
absl::StatusOr<trust::SigningKey> LoadTimestampKey(const std::string& path);

class TimestampSigner {
 public:
  enum class Outcome { kFresh, kPublished, kSkipped };

  // `on_published` runs after each new timestamp.json (the server reloads).
  static absl::StatusOr<std::unique_ptr<TimestampSigner>> Create(
      TimestampSignerOptions options, std::shared_ptr<SignedCatalogSource> source,
      ServerMetrics* metrics, std::function<void()> on_published);
  ~TimestampSigner();
  TimestampSigner(const TimestampSigner&) = delete;
  TimestampSigner& operator=(const TimestampSigner&) = delete;

  // The key must be a timestamp key of the root the server trusts now.
  absl::Status CheckKey(absl::Time now);
  // One round at `now`: kFresh when more than half the lifetime is left,
  // kSkipped when another holds the repository lock.
  absl::StatusOr<Outcome> RunOnce(absl::Time now);

  // A round every check_interval() on its own thread, until Stop().
  void Start();
  void Stop();
  // A tenth of the lifetime, between 1 s and 1 min.
  absl::Duration check_interval() const;

 private:
  TimestampSigner(TimestampSignerOptions options, trust::SigningKey key,
                  std::shared_ptr<SignedCatalogSource> source, ServerMetrics* metrics,
                  std::function<void()> on_published);
  void Run();

  const TimestampSignerOptions options_;
  const trust::SigningKey key_;
  const std::shared_ptr<SignedCatalogSource> source_;
  ServerMetrics* const metrics_;
  const std::function<void()> on_published_;

  absl::Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace weightpath::server
