// A throwaway certificate authority made with openssl when a suite starts:
// a CA, a server certificate for localhost / 127.0.0.1, and client
// certificates with the subjects and SANs a test needs. Keys are P-256 and
// everything expires in two days.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "tests/server/server_process.h"

namespace weightpath::server::testing {

class TestCa {
 public:
  // ca.pem/ca.key and server.pem/server.key in a fresh directory.
  static absl::StatusOr<std::unique_ptr<TestCa>> Create();

  // NAME.pem/NAME.key for a client certificate. `subject` like
  // "/CN=amx-1/OU=devices"; `extensions` are extra extfile lines (e.g. a
  // subjectAltName). INTERNAL with openssl's output when it fails.
  absl::Status IssueClient(const std::string& name, const std::string& subject,
                           const std::string& extensions = "");

  // NAME.pem/NAME.key: another server certificate for localhost /
  // 127.0.0.1 from the same CA (a renewal), with a serial of its own; or
  // for `subject_alt_names` instead ("DNS:wp-weightpath.fleet.svc": a name
  // the address a client dials does not carry).
  absl::Status IssueServer(const std::string& name,
                           const std::string& subject_alt_names = "DNS:localhost,IP:127.0.0.1");

  std::string File(const std::string& name) const { return dir_.File(name); }

  // A channel to `address` that trusts this CA and, unless `client` is
  // empty, presents the client certificate NAME.
  std::shared_ptr<grpc::Channel> Channel(const std::string& address,
                                         const std::string& client = "") const;

 private:
  TestCa() = default;
  // Runs `commands` with bash in the directory; openssl's output on failure.
  absl::Status Run(const std::string& commands);

  TempDir dir_;
};

}  // namespace weightpath::server::testing
