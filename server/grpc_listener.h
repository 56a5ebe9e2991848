// The gRPC port's listening sockets and accept loop, owned by the server
// rather than by gRPC, which gets each accepted connection through its
// external-connection acceptor (plaintext or TLS alike: the credentials are
// the acceptor's).
//
// gRPC 1.51's own listener (src/core/lib/iomgr/tcp_server_posix.cc, on_read)
// stops accepting for good after one accept4() failure other than EAGAIN,
// ECONNABORTED or EINTR, so a peer that fills the descriptor table with idle
// connections deafened the server until a restart; and it has no cap on
// connections. This loop keeps descriptors free instead of running out:
//  - accept4() returns the lowest free descriptor, so a connection that lands
//    in the top reserve of the table (RLIMIT_NOFILE read at each accept) means
//    every descriptor below is taken; it is closed at once, before gRPC sees
//    it. Connections therefore never take the reserve, which stays for the
//    store, reloads, /metrics and the listener check.
//  - EMFILE/ENFILE (the reserve used up by something else) and every other
//    accept failure are logged, counted and retried after a short pause: the
//    loop never stops while the server runs.
//  - A connection is handed to gRPC once it has sent its first bytes (its TLS
//    ClientHello or HTTP/2 preface, passed along with it). Until then it waits
//    here, at most --handshake_timeout, and at most a quarter of the
//    connections the port may hold (16 to 4096) wait at once: past that the
//    oldest silent one is closed. So connections that never speak cannot
//    take the places of clients that do.
// Connections still open a descriptor each until gRPC closes them: at the
// handshake deadline if they never speak, when idle, or at their maximum age.
// gRPC's listener also closed new connections while its memory quota was
// overcommitted (on_read's IsMemoryPressureHigh); that was never a cap on
// connections, since an idle one charges the quota next to nothing (its
// first arena block is not charged), and connections handed over skip it.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/host_port.h"
#include "common/unique_fd.h"
#include "grpcpp/server_builder.h"
#include "server/observability/metrics.h"

namespace weightpath::server {

// "HOST:PORT", "[V6]:PORT" or ":PORT" split (common/host_port.h);
// INVALID_ARGUMENT when it names no port.
absl::StatusOr<HostPort> ListenAddress(const std::string& address);

class GrpcListener {
 public:
  // Binds HOST:PORT (port 0 picks one; a wildcard host listens on IPv6 and
  // IPv4 where the machine has both; a name listens on each address it
  // resolves to). UNAVAILABLE naming `address` when it cannot.
  // `max_connections` (0: none beyond the descriptor limit) is counted as
  // descriptors above those in use when Bind() runs: a connection is closed
  // at once when its descriptor is past that many, so the port holds about
  // that many connections (fewer when the server opens files meanwhile).
  static absl::StatusOr<std::unique_ptr<GrpcListener>> Bind(const std::string& address,
                                                            int64_t max_connections,
                                                            absl::Duration first_bytes_timeout,
                                                            ServerMetrics* metrics);
  ~GrpcListener();
  GrpcListener(const GrpcListener&) = delete;
  GrpcListener& operator=(const GrpcListener&) = delete;

  int port() const { return port_; }

  // Accepts from now on, handing each connection to `acceptor` (the gRPC
  // server must be started).
  void Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor);
  // Stops accepting and closes the listening sockets: later connections are
  // refused by the kernel. Those already handed over stay gRPC's.
  void Stop();

  // Descriptors kept free of connections under a limit of `limit`.
  static int ReservedDescriptors(int limit);

 private:
  GrpcListener(std::vector<UniqueFd> sockets, int port, int64_t highest_connection_fd,
               size_t max_silent, absl::Duration first_bytes_timeout, ServerMetrics* metrics);
  void Run();
  // Gives `fd` to gRPC with whatever it has sent so far; closes it instead
  // when the peer has gone.
  void HandOver(int fd);
  // Why `fd`, just accepted, is to be closed at once: it lands in the
  // descriptor reserve or past --max_connections; nullopt when it may stay.
  std::optional<GrpcConnectionRefusal> Refusal(int fd) const;

  std::vector<UniqueFd> sockets_;
  const int port_;
  const int64_t highest_connection_fd_;  // INT64_MAX: no --max_connections
  const size_t max_silent_;
  const absl::Duration first_bytes_timeout_;
  ServerMetrics* const metrics_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace weightpath::server
