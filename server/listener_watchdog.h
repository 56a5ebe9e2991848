// Proves, every interval, that the gRPC port still accepts connections, and
// reports when it does not.
//
// The port's accept loop is the server's own (server/grpc_listener.h), built
// so that running out of descriptors cannot stop it as it stopped gRPC 1.51's
// listener for good. This is the backstop for whatever still could: a wedged
// accept thread, a gRPC that no longer takes the connections it is handed. A
// deaf port is invisible from outside: the kernel still completes TCP
// handshakes into the backlog, so a TCP probe and /metrics go on answering
// while no call is ever served again. There is no mending it in place, so the
// watchdog says so (the log, weightpath_grpc_listener_up, health NOT_SERVING)
// and has the process exit non-zero: systemd's Restart=on-failure and
// Kubernetes restart it, and the new process listens afresh.
//
// A check connects over loopback to the bound port and waits for the server
// to act on the connection: bytes back (the server's HTTP/2 SETTINGS in
// plaintext; its answer to a TLS ClientHello), an orderly close or a reset
// (a connection the accept loop closed at once to keep descriptors free
// counts: it was accepted). Only a connection left in the backlog gets none
// of these. The check sends what a client would and closes before any call,
// so it is not logged and counts in no RPC metric.
#pragma once

#include <sys/socket.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/observability/metrics.h"

namespace weightpath::server {

struct ListenerWatchdogOptions {
  // HOST:PORT as bound; a wildcard host (0.0.0.0, [::]) is checked on loopback.
  std::string address;
  bool tls = false;
  // A check not answered within the interval has failed.
  absl::Duration interval = absl::Seconds(10);
  // Failed checks in a row before the listener is declared deaf: one lost
  // check on a loaded machine restarts nothing.
  int failures_before_deaf = 3;
};

class ListenerWatchdog {
 public:
  // `on_deaf(why)` runs once, on the watchdog's thread, when the listener is
  // declared deaf; the checks stop then.
  using DeafCallback = std::function<void(const std::string& why)>;
  static absl::StatusOr<std::unique_ptr<ListenerWatchdog>> Create(ListenerWatchdogOptions options,
                                                                  ServerMetrics* metrics,
                                                                  DeafCallback on_deaf);
  ~ListenerWatchdog();
  ListenerWatchdog(const ListenerWatchdog&) = delete;
  ListenerWatchdog& operator=(const ListenerWatchdog&) = delete;

  void Start();
  // Returns once the thread has ended (at most one check's timeout).
  void Stop();

  // One check: OK when the server acted on a connection within `timeout`.
  absl::Status CheckOnce(absl::Duration timeout) const;

 private:
  ListenerWatchdog(ListenerWatchdogOptions options, ServerMetrics* metrics, DeafCallback on_deaf);
  void Run();

  const ListenerWatchdogOptions options_;
  ServerMetrics* const metrics_;
  const DeafCallback on_deaf_;
  sockaddr_storage target_{};
  socklen_t target_length_ = 0;
  // What the check sends: the HTTP/2 client preface and an empty SETTINGS
  // frame in plaintext, a ClientHello under TLS.
  std::string hello_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace weightpath::server
