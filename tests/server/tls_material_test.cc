// LoadTlsMaterial in-process, on files a throwaway CA made: what a TLS file
// half written, encrypted or mismatched looks like, each refused naming the
// flag and the file, and what a usable set looks like.
#include "server/security/tls_material.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_process.h"
#include "tests/server/test_ca.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::server {
namespace {

using ::testing::HasSubstr;
using ::weightpath::server::testing::ReadFileOrDie;
using ::weightpath::server::testing::TempDir;
using ::weightpath::server::testing::TestCa;
using ::weightpath::server::testing::WriteFileOrDie;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

class TlsMaterialTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto ca = TestCa::Create();
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = ca->release();
    ASSERT_TRUE(ca_->IssueServer("other").ok());
  }
  static void TearDownTestSuite() {
    delete ca_;
    ca_ = nullptr;
  }

  void SetUp() override {
    WriteFileOrDie(Path("tls.crt"), ReadFileOrDie(ca_->File("server.pem")));
    WriteFileOrDie(Path("tls.key"), ReadFileOrDie(ca_->File("server.key")));
    WriteFileOrDie(Path("ca.crt"), ReadFileOrDie(ca_->File("ca.pem")));
  }

  std::string Path(const std::string& name) const { return files_.File(name); }
  TlsPaths Paths() const { return TlsPaths{Path("tls.crt"), Path("tls.key"), Path("ca.crt")}; }

  static TestCa* ca_;
  TempDir files_;
};

TestCa* TlsMaterialTest::ca_ = nullptr;

TEST_F(TlsMaterialTest, AUsableSetIsReadWhole) {
  absl::StatusOr<TlsMaterial> material = LoadTlsMaterial(Paths());
  ASSERT_THAT(material.status(), IsOk());
  EXPECT_EQ(material->certificate_chain, ReadFileOrDie(ca_->File("server.pem")));
  EXPECT_EQ(material->client_ca, ReadFileOrDie(ca_->File("ca.pem")));
  EXPECT_FALSE(material->serial.empty());
  EXPECT_LT(material->not_before, material->not_after);
}

TEST_F(TlsMaterialTest, AChainCutInItsSecondCertificateIsRefused) {
  const std::string second = ReadFileOrDie(ca_->File("ca.pem"));
  WriteFileOrDie(Path("tls.crt"), ReadFileOrDie(ca_->File("server.pem")) +
                                      second.substr(0, second.size() / 2));
  EXPECT_THAT(LoadTlsMaterial(Paths()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("--tls_cert: ", Path("tls.crt"),
                                              ": a certificate does not parse"))));
}

TEST_F(TlsMaterialTest, OtherPemBlocksInTheChainAreSkipped) {
  WriteFileOrDie(Path("tls.crt"), ReadFileOrDie(ca_->File("server.pem")) +
                                      ReadFileOrDie(ca_->File("server.key")) +
                                      ReadFileOrDie(ca_->File("ca.pem")));
  EXPECT_THAT(LoadTlsMaterial(Paths()).status(), IsOk());
}

TEST_F(TlsMaterialTest, AKeyOfAnotherCertificateIsRefused) {
  WriteFileOrDie(Path("tls.key"), ReadFileOrDie(ca_->File("other.key")));
  EXPECT_THAT(LoadTlsMaterial(Paths()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("--tls_key: ", Path("tls.key"),
                                              ": does not match the certificate in --tls_cert=",
                                              Path("tls.crt")))));
}

TEST_F(TlsMaterialTest, AnEncryptedKeyIsRefusedWithoutAskingForAPassphrase) {
  const std::string command = absl::StrCat("openssl pkey -in ", ca_->File("server.key"),
                                           " -aes256 -passout pass:secret -out ", Path("tls.key"),
                                           " 2>/dev/null </dev/null");
  ASSERT_EQ(std::system(command.c_str()), 0);
  EXPECT_THAT(LoadTlsMaterial(Paths()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("an encrypted key")));
}

TEST_F(TlsMaterialTest, ACaBundleThatDoesNotParseIsRefused) {
  WriteFileOrDie(Path("ca.crt"), "-----BEGIN CERTIFICATE-----\nnot base64 at all\n"
                                 "-----END CERTIFICATE-----\n");
  EXPECT_THAT(LoadTlsMaterial(Paths()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("--client_ca: ", Path("ca.crt"), ": "))));
}

TEST_F(TlsMaterialTest, EmptyFilesAndFifosAreRefusedAtOnce) {
  WriteFileOrDie(Path("tls.key"), "");
  EXPECT_THAT(LoadTlsMaterial(Paths()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("--tls_key: ", Path("tls.key"), ": empty"))));
  ASSERT_EQ(std::remove(Path("tls.crt").c_str()), 0);
  ASSERT_EQ(mkfifo(Path("tls.crt").c_str(), 0600), 0);
  EXPECT_THAT(LoadTlsMaterial(Paths()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("--tls_cert: ", Path("tls.crt"),
                                              ": a FIFO, not a regular file"))));
}

}  // namespace
}  // namespace weightpath::server
