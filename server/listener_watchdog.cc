#include "server/listener_watchdog.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "common/unique_fd.h"
#include "openssl/bio.h"
#include "openssl/ssl.h"
#include "server/grpc_listener.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {
namespace {

// The HTTP/2 client connection preface and an empty SETTINGS frame: what a
// gRPC client sends first, which a plaintext server answers with its own
// SETTINGS.
constexpr char kHttp2Preface[] =
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    "\x00\x00\x00\x04\x00\x00\x00\x00\x00";
constexpr size_t kHttp2PrefaceBytes = sizeof(kHttp2Preface) - 1;

// A TLS ClientHello offering h2, from OpenSSL's own client state machine
// (no certificate is checked: nothing is sent after the server's answer).
// Any TLS server answers it, mutual TLS included (the server asks for a
// certificate only after its hello), so the check needs no credentials.
absl::StatusOr<std::string> TlsClientHello() {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context(SSL_CTX_new(TLS_client_method()),
                                                            &SSL_CTX_free);
  if (context == nullptr) return absl::InternalError("listener check: SSL_CTX_new failed");
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(context.get()), &SSL_free);
  if (ssl == nullptr) return absl::InternalError("listener check: SSL_new failed");
  BIO* from_server = BIO_new(BIO_s_mem());
  BIO* to_server = BIO_new(BIO_s_mem());
  if (from_server == nullptr || to_server == nullptr) {
    BIO_free(from_server);
    BIO_free(to_server);
    return absl::InternalError("listener check: BIO_new failed");
  }
  SSL_set_bio(ssl.get(), from_server, to_server);  // owned by `ssl` from here
  static constexpr unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_set_alpn_protos(ssl.get(), kAlpn, sizeof(kAlpn));
  SSL_set_connect_state(ssl.get());
  SSL_do_handshake(ssl.get());  // writes the hello, then wants the server's answer
  char* bytes = nullptr;
  const long length = BIO_get_mem_data(to_server, &bytes);
  if (length <= 0) return absl::InternalError("listener check: OpenSSL wrote no ClientHello");
  return std::string(bytes, static_cast<size_t>(length));
}

// "0.0.0.0:50051" -> 127.0.0.1, "[::]:50051" -> ::1, else the host as bound.
absl::Status ResolveLoopbackTarget(const std::string& address, sockaddr_storage* target,
                                   socklen_t* length) {
  ASSIGN_OR_RETURN(const HostPort split, ListenAddress(address));
  std::string host = split.host;
  const std::string& port = split.port;
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int error = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (error != 0 || found == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("listener check: cannot resolve ", address, ": ", gai_strerror(error)));
  }
  std::memcpy(target, found->ai_addr, found->ai_addrlen);
  *length = found->ai_addrlen;
  freeaddrinfo(found);
  return absl::OkStatus();
}

// "37 of 1024 descriptors in use"; the table being full is itself the
// usual reason for a deaf listener, and then even /proc/self/fd cannot be
// opened.
std::string DescriptorUse() {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  DIR* directory = opendir("/proc/self/fd");
  if (directory == nullptr) {
    return absl::StrCat("descriptors: none free to count them (", std::strerror(errno),
                        "), limit ", limit.rlim_cur);
  }
  size_t count = 0;
  while (const dirent* entry = readdir(directory)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(directory);
  return absl::StrCat(count - 1, " of ", limit.rlim_cur, " descriptors in use");
}

// Waits for `events` on `fd` until `deadline`, in short slices so that Stop()
// never waits for a whole check.
absl::Status WaitFor(int fd, short events, MonotonicTime deadline, const absl::Notification& stop,
                     absl::string_view what) {
  for (;;) {
    if (stop.HasBeenNotified()) return absl::CancelledError("listener check: stopping");
    const absl::Duration left = deadline - SystemClockInstance()->MonotonicNow();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("listener check: ", what));
    }
    pollfd entry{fd, events, 0};
    const int ready =
        poll(&entry, 1, static_cast<int>(std::min(left, absl::Milliseconds(50)) /
                                         absl::Milliseconds(1)) + 1);
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) return ErrnoStatus(errno, "listener check: poll");
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ListenerWatchdog>> ListenerWatchdog::Create(
    ListenerWatchdogOptions options, ServerMetrics* metrics, DeafCallback on_deaf) {
  std::unique_ptr<ListenerWatchdog> watchdog(
      new ListenerWatchdog(std::move(options), metrics, std::move(on_deaf)));
  absl::Status resolved = ResolveLoopbackTarget(watchdog->options_.address, &watchdog->target_,
                                                &watchdog->target_length_);
  if (!resolved.ok()) return resolved;
  if (watchdog->options_.tls) {
    absl::StatusOr<std::string> hello = TlsClientHello();
    if (!hello.ok()) return hello.status();
    watchdog->hello_ = *std::move(hello);
  } else {
    watchdog->hello_.assign(kHttp2Preface, kHttp2PrefaceBytes);
  }
  return watchdog;
}

ListenerWatchdog::ListenerWatchdog(ListenerWatchdogOptions options, ServerMetrics* metrics,
                                   DeafCallback on_deaf)
    : options_(std::move(options)), metrics_(metrics), on_deaf_(std::move(on_deaf)) {}

ListenerWatchdog::~ListenerWatchdog() { Stop(); }

void ListenerWatchdog::Start() { thread_ = std::thread([this] { Run(); }); }

void ListenerWatchdog::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

absl::Status ListenerWatchdog::CheckOnce(absl::Duration timeout) const {
  const MonotonicTime deadline = SystemClockInstance()->MonotonicNow() + timeout;
  UniqueFd socket_fd(
      socket(target_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP));
  if (!socket_fd.valid()) return ErrnoStatus(errno, "listener check: socket");
  if (connect(socket_fd.get(), reinterpret_cast<const sockaddr*>(&target_), target_length_) != 0 &&
      errno != EINPROGRESS) {
    return ErrnoStatus(errno, "listener check: connect");
  }
  RETURN_IF_ERROR(WaitFor(socket_fd.get(), POLLOUT, deadline, stop_,
                          "the connection was not established in time"));
  int error = 0;
  socklen_t error_length = sizeof(error);
  getsockopt(socket_fd.get(), SOL_SOCKET, SO_ERROR, &error, &error_length);
  if (error != 0) return ErrnoStatus(error, "listener check: connect");
  if (send(socket_fd.get(), hello_.data(), hello_.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(hello_.size())) {
    return ErrnoStatus(errno, "listener check: send");
  }
  RETURN_IF_ERROR(WaitFor(socket_fd.get(), POLLIN, deadline, stop_,
                          "connected, but the server never took the connection (it sits in "
                          "the kernel's backlog)"));
  // Bytes, an orderly close or a reset all mean gRPC accepted it. What is
  // left unread is drained so the close is a FIN, not a reset.
  char buffer[4096];
  const ssize_t got = recv(socket_fd.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
  if (got < 0 && errno != ECONNRESET && errno != EAGAIN) {
    return ErrnoStatus(errno, "listener check: recv");
  }
  while (got > 0 && recv(socket_fd.get(), buffer, sizeof(buffer), MSG_DONTWAIT) > 0) {
  }
  return absl::OkStatus();
}

void ListenerWatchdog::Run() {
  NameThisThread("wp-listen-check");
  int failures = 0;
  while (!stop_.WaitForNotificationWithTimeout(options_.interval)) {
    const absl::Status checked = CheckOnce(options_.interval);
    if (stop_.HasBeenNotified()) return;  // a check cut short by shutdown says nothing
    if (checked.ok()) {
      if (failures > 0) {
        spdlog::info("gRPC listener on {} answered again after {} failed check(s)",
                     options_.address, failures);
      }
      failures = 0;
      metrics_->SetGrpcListenerUp(true);
      continue;
    }
    ++failures;
    spdlog::warn("gRPC listener on {}: check {} of {} failed: {} ({})", options_.address, failures,
                 options_.failures_before_deaf, std::string(checked.message()), DescriptorUse());
    if (failures >= options_.failures_before_deaf) {
      metrics_->SetGrpcListenerUp(false);
      on_deaf_(absl::StrCat("the gRPC listener on ", options_.address, " answered none of ",
                            failures, " checks ", absl::FormatDuration(options_.interval),
                            " apart (", DescriptorUse(), ")"));
      return;
    }
  }
}

}  // namespace weightpath::server
