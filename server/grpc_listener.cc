#include "server/grpc_listener.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <deque>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/thread_name.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {
namespace {

// What listen() is asked for; the kernel caps it at net.core.somaxconn, as
// gRPC's own listener does.
constexpr int kBacklog = 4096;
// After an accept() that failed for want of descriptors (or any other
// reason), the loop pauses rather than spinning on a socket that stays
// readable; the waiting connection stays in the backlog meanwhile.
constexpr absl::Duration kPauseAfterFailure = absl::Milliseconds(50);
// At most one log line per reason this often; the counters have every event.
constexpr absl::Duration kLogEvery = absl::Seconds(10);
// Marks a listening socket's epoll entry; a connection's carries its fd alone.
constexpr uint64_t kListeningTag = uint64_t{1} << 32;

bool IsWildcard(const std::string& host) { return host.empty() || host == "0.0.0.0" || host == "::"; }

absl::StatusOr<UniqueFd> ListenOn(const sockaddr* address, socklen_t length, bool dual_stack) {
  UniqueFd fd(socket(address->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP));
  if (!fd.valid()) return ErrnoStatus(errno, "socket");
  const int on = 1;
  const int off = 0;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (address->sa_family == AF_INET6) {
    setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &off : &on, sizeof(int));
  }
  if (bind(fd.get(), address, length) != 0) return ErrnoStatus(errno, "bind");
  if (listen(fd.get(), kBacklog) != 0) return ErrnoStatus(errno, "listen");
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return 0;
  return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

// Connections accepted and not yet heard from, oldest first. Every one has
// the same timeout, so accept order is deadline order.
class Silent {
 public:
  size_t size() const { return deadline_of_.size(); }
  bool Contains(int fd) const { return deadline_of_.contains(fd); }
  void Add(int fd, MonotonicTime deadline) {
    deadline_of_[fd] = deadline;
    order_.push_back({fd, deadline});
  }
  // No longer silent (heard from, or closed by the caller).
  void Forget(int fd) { deadline_of_.erase(fd); }
  // The oldest silent connection, forgotten; -1 when there is none.
  int TakeOldest() { return Take(MonotonicTime::FromSinceOrigin(absl::InfiniteDuration())); }
  // One whose deadline has passed, forgotten; -1 when there is none.
  int TakeExpired(MonotonicTime now) { return Take(now); }

 private:
  int Take(MonotonicTime no_later_than) {
    while (!order_.empty()) {
      const auto [fd, deadline] = order_.front();
      const auto live = deadline_of_.find(fd);
      // An entry whose descriptor was heard from, or reused for a newer
      // connection, is stale.
      if (live == deadline_of_.end() || live->second != deadline) {
        order_.pop_front();
        continue;
      }
      if (deadline > no_later_than) return -1;
      order_.pop_front();
      deadline_of_.erase(live);
      return fd;
    }
    return -1;
  }

  absl::flat_hash_map<int, MonotonicTime> deadline_of_;
  std::deque<std::pair<int, MonotonicTime>> order_;
};

int DescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return INT_MAX;
  return static_cast<int>(std::min<rlim_t>(limit.rlim_cur, INT_MAX));
}

}  // namespace

absl::StatusOr<HostPort> ListenAddress(const std::string& address) {
  HostPort split = SplitHostPort(address);
  if (split.port.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(address, " is not HOST:PORT"));
  }
  return split;
}

int GrpcListener::ReservedDescriptors(int limit) { return std::clamp(limit / 16, 16, 1024); }

absl::StatusOr<std::unique_ptr<GrpcListener>> GrpcListener::Bind(
    const std::string& address, int64_t max_connections, absl::Duration first_bytes_timeout,
    ServerMetrics* metrics) {
  auto refused = [&address](const absl::Status& status) {
    return absl::UnavailableError(absl::StrCat("--listen=", address, ": cannot listen: ",
                                               status.message()));
  };
  absl::StatusOr<HostPort> split = ListenAddress(address);
  if (!split.ok()) return refused(split.status());
  const std::string& host = split->host;
  const std::string& port = split->port;
  std::vector<UniqueFd> sockets;
  if (IsWildcard(host)) {
    // As gRPC does for both spellings of the wildcard: one IPv6 socket that
    // takes IPv4 too, else IPv4 alone (a machine or container without IPv6).
    int number = 0;
    if (!absl::SimpleAtoi(port, &number) || number < 0 || number > 65535) {
      return refused(absl::InvalidArgumentError(absl::StrCat("port \"", port, "\"")));
    }
    sockaddr_in6 any6{};
    any6.sin6_family = AF_INET6;
    any6.sin6_addr = in6addr_any;
    any6.sin6_port = htons(static_cast<uint16_t>(number));
    absl::StatusOr<UniqueFd> fd =
        ListenOn(reinterpret_cast<sockaddr*>(&any6), sizeof(any6), /*dual_stack=*/true);
    if (!fd.ok()) {
      sockaddr_in any4{};
      any4.sin_family = AF_INET;
      any4.sin_addr.s_addr = htonl(INADDR_ANY);
      any4.sin_port = htons(static_cast<uint16_t>(number));
      fd = ListenOn(reinterpret_cast<sockaddr*>(&any4), sizeof(any4), false);
    }
    if (!fd.ok()) return refused(fd.status());
    sockets.push_back(*std::move(fd));
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (const int error = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); error != 0) {
      return refused(absl::UnavailableError(gai_strerror(error)));
    }
    // Port 0 on a name with several addresses ("localhost"): the first picks
    // the port, the others take the same one.
    int chosen = 0;
    absl::Status last = absl::OkStatus();
    for (addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
      sockaddr_storage address_copy{};
      std::memcpy(&address_copy, entry->ai_addr, entry->ai_addrlen);
      if (chosen != 0) {
        const uint16_t network_port = htons(static_cast<uint16_t>(chosen));
        if (address_copy.ss_family == AF_INET6) {
          reinterpret_cast<sockaddr_in6*>(&address_copy)->sin6_port = network_port;
        } else {
          reinterpret_cast<sockaddr_in*>(&address_copy)->sin_port = network_port;
        }
      }
      absl::StatusOr<UniqueFd> fd = ListenOn(reinterpret_cast<sockaddr*>(&address_copy),
                                             entry->ai_addrlen, /*dual_stack=*/false);
      if (!fd.ok()) {
        last = fd.status();
        continue;
      }
      if (chosen == 0) chosen = BoundPort(fd->get());
      sockets.push_back(*std::move(fd));
    }
    freeaddrinfo(found);
    if (sockets.empty()) return refused(last.ok() ? absl::UnavailableError("no address") : last);
  }
  const int bound_port = BoundPort(sockets.front().get());
  // The lowest descriptor free now is about how many the server uses for
  // itself; connections come above it.
  UniqueFd probe(dup(sockets.front().get()));
  const int64_t in_use = probe.valid() ? probe.get() : 0;
  int64_t highest = INT64_MAX;
  if (max_connections > 0) highest = in_use + max_connections - 1;
  const int limit = DescriptorLimit();
  const int64_t places =
      max_connections > 0 ? max_connections : limit - ReservedDescriptors(limit) - in_use;
  const size_t max_silent = static_cast<size_t>(std::clamp<int64_t>(places / 4, 16, 4096));
  return std::unique_ptr<GrpcListener>(new GrpcListener(
      std::move(sockets), bound_port, highest, max_silent, first_bytes_timeout, metrics));
}

GrpcListener::GrpcListener(std::vector<UniqueFd> sockets, int port, int64_t highest_connection_fd,
                           size_t max_silent, absl::Duration first_bytes_timeout,
                           ServerMetrics* metrics)
    : sockets_(std::move(sockets)),
      port_(port),
      highest_connection_fd_(highest_connection_fd),
      max_silent_(max_silent),
      first_bytes_timeout_(first_bytes_timeout),
      metrics_(metrics) {}

GrpcListener::~GrpcListener() { Stop(); }

void GrpcListener::Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor) {
  acceptor_ = std::move(acceptor);
  thread_ = std::thread([this] { Run(); });
}

void GrpcListener::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  sockets_.clear();
}

std::optional<GrpcConnectionRefusal> GrpcListener::Refusal(int fd) const {
  const int limit = DescriptorLimit();
  if (fd >= limit - ReservedDescriptors(limit)) return GrpcConnectionRefusal::kDescriptorReserve;
  if (fd > highest_connection_fd_) return GrpcConnectionRefusal::kMaxConnections;
  return std::nullopt;
}

void GrpcListener::Run() {
  NameThisThread("wp-grpc-accept");
  UniqueFd events(epoll_create1(EPOLL_CLOEXEC));
  if (!events.valid()) {
    spdlog::error("gRPC port: epoll_create1: {}; no connection will be accepted",
                  std::strerror(errno));
    return;
  }
  for (const UniqueFd& socket : sockets_) {
    epoll_event listening{};
    listening.events = EPOLLIN;
    listening.data.u64 = kListeningTag | static_cast<uint32_t>(socket.get());
    epoll_ctl(events.get(), EPOLL_CTL_ADD, socket.get(), &listening);
  }
  Silent silent;
  uint64_t shed = 0;
  uint64_t failed = 0;
  // Deadlines and log intervals on the monotonic clock: a step of the wall
  // clock must not expire every silent connection at once.
  Clock* const clock = SystemClockInstance();
  const MonotonicTime never = MonotonicTime::FromSinceOrigin(-absl::InfiniteDuration());
  MonotonicTime shed_logged = never;
  MonotonicTime failure_logged = never;
  epoll_event ready[64];
  while (!stop_.load()) {
    // Short, so that Stop() is answered promptly and deadlines are kept to
    // within a tenth of a second.
    const int count = epoll_wait(events.get(), ready, 64, 100);
    const MonotonicTime now = clock->MonotonicNow();
    for (int i = 0; i < count; ++i) {
      if ((ready[i].data.u64 & kListeningTag) == 0) {
        // A connection's first bytes (or its end): gRPC takes it from here.
        // One closed earlier in this batch (the oldest silent one, to make
        // room) is skipped: its number may belong to another file by now.
        const int fd = static_cast<int>(ready[i].data.u64);
        if (!silent.Contains(fd)) continue;
        epoll_ctl(events.get(), EPOLL_CTL_DEL, fd, nullptr);
        silent.Forget(fd);
        HandOver(fd);
        continue;
      }
      const int listening = static_cast<int>(ready[i].data.u64 & 0xffffffffu);
      for (;;) {
        const int fd = accept4(listening, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          if (errno == EINTR || errno == ECONNABORTED) continue;
          const int error = errno;
          ++failed;
          metrics_->RecordGrpcConnectionRefused(GrpcConnectionRefusal::kAcceptFailed);
          if (now - failure_logged >= kLogEvery) {
            failure_logged = now;
            spdlog::warn("gRPC port: accept failed {} time(s) so far, last: {}; retrying",
                         failed, std::strerror(error));
          }
          absl::SleepFor(kPauseAfterFailure);
          break;
        }
        if (const std::optional<GrpcConnectionRefusal> refusal = Refusal(fd)) {
          close(fd);
          ++shed;
          metrics_->RecordGrpcConnectionRefused(*refusal);
          if (now - shed_logged >= kLogEvery) {
            shed_logged = now;
            spdlog::warn("gRPC port: {} connection(s) closed at once so far: descriptor {} is past "
                         "--max_connections or in the last {} of the limit of {}, kept for the "
                         "server's own use",
                         shed, fd, ReservedDescriptors(DescriptorLimit()), DescriptorLimit());
          }
          continue;
        }
        // As gRPC's own listener leaves it: calls are small, and Nagle would
        // hold an answer back for the client's next ACK.
        const int on = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
        if (silent.size() >= max_silent_) {
          const int oldest = silent.TakeOldest();
          close(oldest);  // leaves the epoll set with it
          metrics_->RecordGrpcConnectionRefused(GrpcConnectionRefusal::kSilentOverCap);
        }
        epoll_event waiting{};
        waiting.events = EPOLLIN | EPOLLRDHUP;
        waiting.data.u64 = static_cast<uint32_t>(fd);
        if (epoll_ctl(events.get(), EPOLL_CTL_ADD, fd, &waiting) != 0) {
          HandOver(fd);  // cannot wait for it here: gRPC's deadline applies
          continue;
        }
        silent.Add(fd, now + first_bytes_timeout_);
      }
    }
    for (int fd = silent.TakeExpired(clock->MonotonicNow()); fd >= 0;
         fd = silent.TakeExpired(clock->MonotonicNow())) {
      close(fd);
      metrics_->RecordGrpcConnectionRefused(GrpcConnectionRefusal::kSilentPastDeadline);
    }
  }
  for (int fd = silent.TakeOldest(); fd >= 0; fd = silent.TakeOldest()) close(fd);
}

void GrpcListener::HandOver(int fd) {
  // What the peer sent first (its TLS ClientHello or HTTP/2 preface) goes
  // with the connection: gRPC reads it before the socket.
  char first[16384];
  const ssize_t got = recv(fd, first, sizeof(first), MSG_DONTWAIT);
  if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    close(fd);  // gone before it said anything
    return;
  }
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters connection;
  connection.listener_fd = sockets_.front().get();
  connection.fd = fd;
  if (got > 0) {
    grpc::Slice bytes(first, static_cast<size_t>(got));
    connection.read_buffer = grpc::ByteBuffer(&bytes, 1);
  }
  acceptor_->HandleNewConnection(&connection);
}

}  // namespace weightpath::server
