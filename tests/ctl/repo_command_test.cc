// weightpathctl repo, driven as an operator drives it: the real binary on a
// real directory, keys from files, every file a device would fetch checked
// by the same verifier a device runs.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "trust/json.h"

namespace weightpath::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::weightpath::testing::ProcessResult;
using ::weightpath::testing::RunProcess;

ProcessResult Ctl(std::vector<std::string> args) {
  args.insert(args.begin(), WEIGHTPATHCTL_PATH);
  return RunProcess(args);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class CtlRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/ctl_repo_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    repo_ = dir_ + "/repo";
    keys_ = dir_ + "/keys";
    ProcessResult init = Ctl({"repo", "init", "--repo", repo_, "--generate-keys", keys_});
    ASSERT_EQ(init.exit_code, 0) << init.out << init.err;
    init_output_ = init.out + init.err;
    artifact_ = dir_ + "/w4a8-amx.bin";
    std::ofstream(artifact_) << "int4 weights";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Key(const std::string& role) const { return keys_ + "/" + role + ".pem"; }

  // A new ed25519 key from OpenSSL's own tool, as an operator makes one.
  std::string OpensslKey(const std::string& name) const {
    const std::string path = dir_ + "/" + name + ".pem";
    ProcessResult made = RunProcess({"openssl", "genpkey", "-algorithm", "ed25519", "-out", path});
    EXPECT_EQ(made.exit_code, 0) << made.err;
    return path;
  }

  void AddSignPublish(const std::string& path) {
    ProcessResult added = Ctl({"repo", "add-target", "--repo", repo_, "--path", path, "--file",
                               artifact_, "--model", "spark-1.7b", "--weight-path", "w4a8-amx",
                               "--version", "2026.11.1", "--hardware-classes", "x86_cpu"});
    ASSERT_EQ(added.exit_code, 0) << added.err;
    ProcessResult signed_targets =
        Ctl({"repo", "sign", "--repo", repo_, "--role", "targets", "--key", Key("targets")});
    ASSERT_EQ(signed_targets.exit_code, 0) << signed_targets.err;
    EXPECT_THAT(signed_targets.out, HasSubstr("ready: publish it"));
    ProcessResult published = Ctl({"repo", "timestamp", "--repo", repo_, "--key", Key("timestamp"),
                                   "--snapshot-key", Key("snapshot")});
    ASSERT_EQ(published.exit_code, 0) << published.err;
  }

  trust::Json Verify(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"repo", "verify", "--repo", repo_, "-o", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    ProcessResult verified = Ctl(args);
    EXPECT_EQ(verified.exit_code, 0) << verified.err;
    absl::StatusOr<trust::Json> json = trust::ParseJson(verified.out, "verify output");
    EXPECT_TRUE(json.ok()) << json.status() << verified.out;
    return json.ok() ? *json : trust::Json();
  }

  static int64_t Version(const trust::Json& verify, const std::string& role) {
    return verify.Find(role)->Find("version")->int_value();
  }

  std::string dir_, repo_, keys_, artifact_, init_output_;
};

TEST_F(CtlRepoTest, InitWritesOwnerOnlyKeysAndNeverPrintsThem) {
  for (const char* role : {"root", "targets", "snapshot", "timestamp"}) {
    struct stat info {};
    ASSERT_EQ(stat(Key(role).c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u) << role;
    const std::string pem = Slurp(Key(role));
    ASSERT_THAT(pem, HasSubstr("BEGIN PRIVATE KEY"));
    // The base64 body of the key is in no output.
    const std::string body = pem.substr(pem.find('\n') + 1, 40);
    EXPECT_THAT(init_output_, Not(HasSubstr(body)));
  }
  struct stat info {};
  ASSERT_EQ(stat(keys_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  EXPECT_TRUE(std::filesystem::exists(repo_ + "/metadata/1.root.json"));
  EXPECT_TRUE(std::filesystem::exists(repo_ + "/metadata/1.targets.json"));
  EXPECT_TRUE(std::filesystem::exists(repo_ + "/metadata/timestamp.json"));

  ProcessResult again = Ctl({"repo", "init", "--repo", repo_, "--generate-keys", keys_});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_THAT(again.err, HasSubstr("already a repository"));
  ProcessResult other = Ctl({"repo", "init", "--repo", dir_ + "/other", "--generate-keys", keys_});
  EXPECT_NE(other.exit_code, 0);
  EXPECT_THAT(other.err, HasSubstr("refusing to overwrite a key"));
}

TEST_F(CtlRepoTest, AddSignPublishVerify) {
  AddSignPublish("models/spark/w4a8-amx.bin");
  trust::Json verified = Verify({"--target", "models/spark/w4a8-amx.bin"});
  EXPECT_EQ(Version(verified, "targets"), 2);
  EXPECT_EQ(Version(verified, "snapshot"), 2);
  EXPECT_EQ(Version(verified, "timestamp"), 2);
  const trust::Json* target = verified.Find("target");
  ASSERT_NE(target, nullptr);
  EXPECT_EQ(target->Find("length")->int_value(), 12);
  EXPECT_EQ(target->Find("custom")->Find("weight_path")->string_value(), "w4a8-amx");
  EXPECT_EQ(target->Find("custom")->Find("hardware_classes")->array().front().string_value(),
            "x86_cpu");

  ProcessResult removed =
      Ctl({"repo", "remove-target", "--repo", repo_, "--path", "models/spark/w4a8-amx.bin"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  ProcessResult unsigned_publish = Ctl({"repo", "timestamp", "--repo", repo_, "--key", Key("timestamp")});
  ASSERT_EQ(unsigned_publish.exit_code, 0) << unsigned_publish.err;
  EXPECT_THAT(unsigned_publish.out, HasSubstr("staged targets v3 is not published"));
  EXPECT_EQ(Version(Verify(), "targets"), 2);
}

TEST_F(CtlRepoTest, TimestampNotesOnlyRolesThatExpireSoon) {
  // The default lifetimes (7-day snapshot, 90-day targets, 365-day root)
  // are not "soon", on the day they are signed or the day after.
  ProcessResult defaults = Ctl({"repo", "timestamp", "--repo", repo_, "--key", Key("timestamp"),
                                "--snapshot-key", Key("snapshot")});
  ASSERT_EQ(defaults.exit_code, 0) << defaults.err;
  EXPECT_THAT(defaults.out, Not(HasSubstr("within"))) << defaults.out;
  ProcessResult timestamp_only = Ctl({"repo", "timestamp", "--repo", repo_, "--key", Key("timestamp")});
  ASSERT_EQ(timestamp_only.exit_code, 0) << timestamp_only.err;
  EXPECT_THAT(timestamp_only.out, Not(HasSubstr("note:"))) << timestamp_only.out;

  // A snapshot with less than half its default lifetime left is noted, with
  // how to renew it; so is a targets role in its last two weeks.
  ProcessResult short_snapshot = Ctl({"repo", "timestamp", "--repo", repo_, "--key", Key("timestamp"),
                                      "--snapshot-key", Key("snapshot"), "--snapshot-expires", "3d"});
  ASSERT_EQ(short_snapshot.exit_code, 0) << short_snapshot.err;
  EXPECT_THAT(short_snapshot.out,
              HasSubstr("within 3.5 days: re-sign it before then (--snapshot-key here)"));
  EXPECT_THAT(short_snapshot.out, Not(HasSubstr("targets v1 expires"))) << short_snapshot.out;
  ASSERT_EQ(Ctl({"repo", "sign", "--repo", repo_, "--role", "targets", "--key", Key("targets"),
                 "--expires", "10d"})
                .exit_code,
            0);
  ProcessResult short_targets = Ctl({"repo", "timestamp", "--repo", repo_, "--key", Key("timestamp"),
                                     "--snapshot-key", Key("snapshot")});
  ASSERT_EQ(short_targets.exit_code, 0) << short_targets.err;
  EXPECT_THAT(short_targets.out, HasSubstr("targets v2 expires at"));
  EXPECT_THAT(short_targets.out,
              HasSubstr("within 14 days: re-sign it before then (repo sign --role targets --expires)"));
  EXPECT_THAT(short_targets.out, Not(HasSubstr("(--snapshot-key here)"))) << short_targets.out;
}

TEST_F(CtlRepoTest, EditingAStagedTargetsDropsItsSignatures) {
  ASSERT_EQ(Ctl({"repo", "add-target", "--repo", repo_, "--path", "a.bin", "--length", "3",
                 "--sha256", std::string(64, 'a')})
                .exit_code,
            0);
  ASSERT_EQ(Ctl({"repo", "sign", "--repo", repo_, "--role", "targets", "--key", Key("targets")})
                .exit_code,
            0);
  ProcessResult edited = Ctl({"repo", "add-target", "--repo", repo_, "--path", "b.bin",
                              "--length", "3", "--sha256", std::string(64, 'b')});
  ASSERT_EQ(edited.exit_code, 0) << edited.err;
  EXPECT_THAT(edited.out, HasSubstr("no longer apply and were dropped"));
}

TEST_F(CtlRepoTest, RefusesPastExpiryShrinkingVersionsAndForeignKeys) {
  ProcessResult past = Ctl({"repo", "sign", "--repo", repo_, "--role", "targets", "--key",
                            Key("targets"), "--expires", "2020-01-01T00:00:00Z"});
  EXPECT_NE(past.exit_code, 0);
  EXPECT_THAT(past.err, HasSubstr("not in the future"));

  ProcessResult foreign =
      Ctl({"repo", "sign", "--repo", repo_, "--role", "targets", "--key", Key("timestamp")});
  EXPECT_NE(foreign.exit_code, 0);
  EXPECT_THAT(foreign.err, HasSubstr("is not a targets key of root v1"));

  // A staged file whose version is the published one (put there by hand).
  std::filesystem::copy_file(repo_ + "/metadata/targets.json", repo_ + "/staged/targets.json");
  ProcessResult shrink =
      Ctl({"repo", "sign", "--repo", repo_, "--role", "targets", "--key", Key("targets")});
  EXPECT_NE(shrink.exit_code, 0);
  EXPECT_THAT(shrink.err, HasSubstr("staged version 1 is not above the published 1"));

  ProcessResult escape = Ctl({"repo", "add-target", "--repo", repo_, "--path", "../etc/passwd",
                              "--length", "1", "--sha256", std::string(64, 'a')});
  EXPECT_EQ(escape.exit_code, 2);
  EXPECT_THAT(escape.err, HasSubstr("'.' or '..' component"));
}

TEST_F(CtlRepoTest, RootRotationNeedsTheOldAndTheNewThreshold) {
  const std::string new_root = OpensslKey("new-root");
  ASSERT_EQ(Ctl({"repo", "rotate-root", "--repo", repo_, "--role", "root", "--keys", new_root})
                .exit_code,
            0);
  ProcessResult only_new = Ctl({"repo", "sign", "--repo", repo_, "--role", "root", "--key", new_root});
  ASSERT_EQ(only_new.exit_code, 0) << only_new.err;
  EXPECT_THAT(only_new.out, HasSubstr("0 of 1 from the root keys of v1"));
  ProcessResult early = Ctl({"repo", "timestamp", "--repo", repo_, "--key", Key("timestamp")});
  ASSERT_EQ(early.exit_code, 0) << early.err;
  EXPECT_THAT(early.out, HasSubstr("staged root v2 is not published"));
  EXPECT_EQ(Version(Verify(), "root"), 1);

  ASSERT_EQ(Ctl({"repo", "sign", "--repo", repo_, "--role", "root", "--key", Key("root")}).exit_code, 0);
  ProcessResult published = Ctl({"repo", "timestamp", "--repo", repo_, "--key", Key("timestamp")});
  ASSERT_EQ(published.exit_code, 0) << published.err;
  EXPECT_THAT(published.out, HasSubstr("published root v2"));
  EXPECT_EQ(Version(Verify(), "root"), 2);

  // The old root key no longer signs anything the new root accepts.
  ASSERT_EQ(Ctl({"repo", "rotate-root", "--repo", repo_, "--role", "targets", "--keys", Key("targets")})
                .exit_code,
            0);
  ProcessResult old_key = Ctl({"repo", "sign", "--repo", repo_, "--role", "root", "--key", Key("root")});
  EXPECT_NE(old_key.exit_code, 0);
  EXPECT_THAT(old_key.err, HasSubstr("is a root key of neither v2 nor v3"));
}

TEST_F(CtlRepoTest, RotatedTimestampKeyIsUsedFromTheNextTimestamp) {
  const std::string new_timestamp = OpensslKey("new-timestamp");
  ASSERT_EQ(Ctl({"repo", "rotate-root", "--repo", repo_, "--role", "timestamp", "--keys", new_timestamp})
                .exit_code,
            0);
  ASSERT_EQ(Ctl({"repo", "sign", "--repo", repo_, "--role", "root", "--key", Key("root")}).exit_code, 0);
  ProcessResult old_key = Ctl({"repo", "timestamp", "--repo", repo_, "--key", Key("timestamp")});
  EXPECT_NE(old_key.exit_code, 0);
  EXPECT_THAT(old_key.err, HasSubstr("is not a timestamp key of root v2"));
  ProcessResult new_key = Ctl({"repo", "timestamp", "--repo", repo_, "--key", new_timestamp});
  ASSERT_EQ(new_key.exit_code, 0) << new_key.err;
  trust::Json verified = Verify();
  EXPECT_EQ(Version(verified, "root"), 2);
  EXPECT_EQ(Version(verified, "timestamp"), 2);
}

TEST_F(CtlRepoTest, VerifyRefusesTamperedAndExpiredMetadata) {
  AddSignPublish("a.bin");
  ProcessResult later = Ctl({"repo", "verify", "--repo", repo_, "--at", "2099-01-01T00:00:00Z"});
  EXPECT_NE(later.exit_code, 0);
  EXPECT_THAT(later.err, HasSubstr("expired"));

  std::string targets = Slurp(repo_ + "/metadata/2.targets.json");
  const size_t at = targets.find("\"length\": 12");
  ASSERT_NE(at, std::string::npos);
  targets.replace(at, 12, "\"length\": 13");
  std::ofstream(repo_ + "/metadata/2.targets.json", std::ios::trunc) << targets;
  ProcessResult tampered = Ctl({"repo", "verify", "--repo", repo_});
  EXPECT_NE(tampered.exit_code, 0);
  EXPECT_THAT(tampered.err, HasSubstr("2.targets.json"));
  EXPECT_THAT(tampered.err, HasSubstr("snapshot.json v2 lists"));
}

}  // namespace
}  // namespace weightpath::ctl
