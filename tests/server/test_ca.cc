#include "tests/server/test_ca.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace weightpath::server::testing {
namespace {

constexpr char kNewKey[] = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
constexpr char kSign[] = "-CA ca.pem -CAkey ca.key -CAcreateserial -days 2";

}  // namespace

absl::Status TestCa::Run(const std::string& commands) {
  const std::string script =
      absl::StrCat("set -e; cd ", dir_.path(), "; exec >openssl.log 2>&1; ", commands);
  WriteFileOrDie(dir_.File("run.sh"), script);
  if (std::system(("bash " + dir_.File("run.sh")).c_str()) != 0) {
    return absl::InternalError(absl::StrCat("openssl failed: ", ReadFileOrDie(dir_.File("openssl.log"))));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TestCa>> TestCa::Create() {
  std::unique_ptr<TestCa> ca(new TestCa());
  WriteFileOrDie(ca->File("server.ext"),
                 "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  const absl::Status made = ca->Run(absl::StrCat(
      "openssl req -x509 ", kNewKey, " -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca; ",
      "openssl req ", kNewKey, " -keyout server.key -out server.csr -subj /CN=localhost; ",
      "openssl x509 -req -in server.csr ", kSign, " -out server.pem -extfile server.ext"));
  if (!made.ok()) return made;
  return ca;
}

absl::Status TestCa::IssueClient(const std::string& name, const std::string& subject,
                                 const std::string& extensions) {
  WriteFileOrDie(File(name + ".ext"), extensions + "extendedKeyUsage=clientAuth\n");
  // Single-quoted, so a subject's spaces (a trailing one included) reach
  // openssl as written; test subjects hold no single quote.
  return Run(absl::StrCat("openssl req ", kNewKey, " -keyout ", name, ".key -out ", name,
                          ".csr -subj '", subject, "'; openssl x509 -req -in ", name, ".csr ", kSign,
                          " -out ", name, ".pem -extfile ", name, ".ext"));
}

absl::Status TestCa::IssueServer(const std::string& name, const std::string& subject_alt_names) {
  WriteFileOrDie(File(name + ".ext"), absl::StrCat("subjectAltName=", subject_alt_names,
                                                   "\nextendedKeyUsage=serverAuth\n"));
  return Run(absl::StrCat("openssl req ", kNewKey, " -keyout ", name, ".key -out ", name,
                          ".csr -subj /CN=localhost; openssl x509 -req -in ", name, ".csr ", kSign,
                          " -out ", name, ".pem -extfile ", name, ".ext"));
}

std::shared_ptr<grpc::Channel> TestCa::Channel(const std::string& address,
                                               const std::string& client) const {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadFileOrDie(File("ca.pem"));
  if (!client.empty()) {
    options.pem_private_key = ReadFileOrDie(File(client + ".key"));
    options.pem_cert_chain = ReadFileOrDie(File(client + ".pem"));
  }
  grpc::ChannelArguments arguments;
  arguments.SetSslTargetNameOverride("localhost");
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(options), arguments);
}

}  // namespace weightpath::server::testing
