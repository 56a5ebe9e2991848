// ed25519 and digests against published vectors, and the PEM handling.
#include "trust/crypto.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::trust {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

std::string Unhex(const std::string& hex) {
  absl::StatusOr<std::string> bytes = HexDecode(hex);
  EXPECT_THAT(bytes, IsOk());
  return bytes.ok() ? *bytes : "";
}

// RFC 8032 section 7.1, TEST 1 (empty message) and TEST 2 (one byte 0x72).
constexpr char kTest1Public[] = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
constexpr char kTest1Signature[] =
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";
constexpr char kTest2Public[] = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";
constexpr char kTest2Signature[] =
    "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00";
// TEST 1's secret key 9d61b19d... as PKCS#8, the form `openssl genpkey`
// writes, and its public key as SubjectPublicKeyInfo.
constexpr char kTest1PrivatePem[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
    "-----END PRIVATE KEY-----\n";
constexpr char kTest1PublicPem[] =
    "-----BEGIN PUBLIC KEY-----\n"
    "MCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n"
    "-----END PUBLIC KEY-----\n";

TEST(TrustCryptoTest, VerifiesRfc8032Vectors) {
  absl::StatusOr<Ed25519PublicKey> key1 = Ed25519PublicKey::FromRaw(Unhex(kTest1Public));
  ASSERT_THAT(key1, IsOk());
  EXPECT_TRUE(key1->Verify("", Unhex(kTest1Signature)));
  EXPECT_FALSE(key1->Verify("x", Unhex(kTest1Signature)));

  absl::StatusOr<Ed25519PublicKey> key2 = Ed25519PublicKey::FromRaw(Unhex(kTest2Public));
  ASSERT_THAT(key2, IsOk());
  EXPECT_TRUE(key2->Verify("\x72", Unhex(kTest2Signature)));
  EXPECT_FALSE(key2->Verify("", Unhex(kTest1Signature)));  // another key's signature

  std::string flipped = Unhex(kTest2Signature);
  flipped[10] ^= 0x01;
  EXPECT_FALSE(key2->Verify("\x72", flipped));
  EXPECT_FALSE(key2->Verify("\x72", Unhex(kTest2Signature).substr(0, 63)));
}

TEST(TrustCryptoTest, SignsDeterministicallyFromAPem) {
  absl::StatusOr<Ed25519PrivateKey> key = Ed25519PrivateKey::FromPem(kTest1PrivatePem);
  ASSERT_THAT(key, IsOk());
  EXPECT_EQ(HexEncode(key->public_key().raw()), kTest1Public);
  absl::StatusOr<std::string> signature = key->Sign("");
  ASSERT_THAT(signature, IsOk());
  EXPECT_EQ(HexEncode(*signature), kTest1Signature);

  absl::StatusOr<Ed25519PublicKey> from_public = Ed25519PublicKeyFromAnyPem(kTest1PublicPem);
  ASSERT_THAT(from_public, IsOk());
  EXPECT_EQ(HexEncode(from_public->raw()), kTest1Public);
  absl::StatusOr<Ed25519PublicKey> from_private = Ed25519PublicKeyFromAnyPem(kTest1PrivatePem);
  ASSERT_THAT(from_private, IsOk());
  EXPECT_EQ(from_private->raw(), from_public->raw());
}

TEST(TrustCryptoTest, GeneratedKeysRoundTripThroughPem) {
  absl::StatusOr<Ed25519PrivateKey> key = Ed25519PrivateKey::Generate();
  ASSERT_THAT(key, IsOk());
  absl::StatusOr<std::string> pem = key->ToPem();
  ASSERT_THAT(pem, IsOk());
  EXPECT_THAT(*pem, HasSubstr("-----BEGIN PRIVATE KEY-----"));
  absl::StatusOr<Ed25519PrivateKey> again = Ed25519PrivateKey::FromPem(*pem);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->public_key().raw(), key->public_key().raw());
  absl::StatusOr<std::string> signature = again->Sign("message");
  ASSERT_THAT(signature, IsOk());
  EXPECT_TRUE(key->public_key().Verify("message", *signature));
  WipeSecret(*pem);
  EXPECT_TRUE(pem->empty());
}

TEST(TrustCryptoTest, RefusesOtherKeysAndEncryptedPem) {
  EXPECT_THAT(Ed25519PrivateKey::FromPem("not a key"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a PEM private key")));
  EXPECT_THAT(Ed25519PrivateKey::FromPem("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("encrypted")));
  // A P-256 key (openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256).
  constexpr char kEcKey[] =
      "-----BEGIN PRIVATE KEY-----\n"
      "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg2gWvqDHiUsaVVDFr\n"
      "LtNyLRoK37YXf/FbiBRgxWR6i0ehRANCAARmeaEV3t/I+H0vpfVt/qtAh/RQE/Xr\n"
      "QLOKoV8VrMohbx2nXa8EV+Zg7a2OCiZKnfXM0uzs04Vy3t7OysvSK9M9\n"
      "-----END PRIVATE KEY-----\n";
  EXPECT_THAT(Ed25519PrivateKey::FromPem(kEcKey),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not ed25519")));
  EXPECT_THAT(Ed25519PublicKey::FromRaw("short"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("32 bytes")));
}

TEST(TrustCryptoTest, DigestsMatchKnownValues) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha512Hex("abc"),
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
            "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f");
  EXPECT_THAT(HashHex("md5", "abc"), StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(HexDecode("abc"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(HexDecode("zz"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace weightpath::trust
